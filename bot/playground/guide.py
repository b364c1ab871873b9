"""The playground's guided first run: three suggested tasks, which model runs, how long a run takes here.

The suggestions are ordinary composer text: the page fills the message field with one and sends it,
so a suggested task takes the same path as a typed one. They name the sample repository (`demo`, see
`forge._DEMO_FILES`) and its real files. The time per run is measured: the run store already holds
when each run started and ended, so the page reads the last finished ones there instead of keeping a
second copy of that fact.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from orchestrator import BackendConfig, RunStatus, RunSummary, TeamConfig

RECENT = 5  # finished runs the time per run is the median of
FIRST_LOCAL_RUN = "first run: about two minutes on 2 cores with the local model"  # 101 s idle, 190 s loaded


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A task the page offers as a button: `label` on it, `text` sent as if typed, `shows` under it."""

    label: str
    text: str
    shows: str


SUGGESTIONS = (
    Suggestion(
        label="Ask about billing.py",
        text="/massgen --repo demo What does billing.py do? Answer from the files.",
        shows="answers from the files",
    ),
    Suggestion(
        label="Fix the failing test",
        text="/massgen --repo demo Fix the failing test in test_billing.py",
        shows="edits, applied after review",
    ),
    Suggestion(
        label="Push the fix",
        text="/massgen --repo demo Push the fix to the remote",
        shows="asks to push: an approval card",
    ),
)


class FinishedRuns(Protocol):
    """Where the page reads the runs that ended (the bot's run store)."""

    async def runs(self, limit: int = 50, *, status: RunStatus | None = None) -> list[RunSummary]: ...


def team_line(team: TeamConfig) -> str:
    """`2 agents: gpt-4o (openai), SmolLM2-135M-Instruct (local, llama.cpp)`: each model once, in order."""
    models = list(dict.fromkeys(_model(agent.backend) for agent in team.agents))
    count = len(team.agents)
    return f"{count} agent{'' if count == 1 else 's'}: {', '.join(models)}"


def _model(backend: BackendConfig) -> str:
    where = "local, llama.cpp" if backend.type == "local" else (backend.preset or backend.type)
    return f"{backend.model} ({where})"


def timing_line(durations: Sequence[float], *, local: bool) -> str:
    """What a run takes here: the median of the last finished runs; before any, a hint for the local model."""
    if durations:
        return f"a run took about {max(round(statistics.median(durations)), 1)} s here"
    return FIRST_LOCAL_RUN if local else ""


@dataclass(slots=True)
class Guide:
    """What the page shows a newcomer; `runs` is set once the bot's storage is open."""

    team: TeamConfig
    runs: FinishedRuns | None = None

    @property
    def local(self) -> bool:
        """Whether every agent runs on the embedded model (the only case the first-run hint is for)."""
        return all(agent.backend.type == "local" for agent in self.team.agents)

    async def durations(self) -> list[float]:
        """Seconds from start to end of the last finished runs, newest first."""
        if self.runs is None:
            return []
        done = await self.runs.runs(RECENT, status="finished")
        return [r.ended_at - r.started_at for r in done if r.ended_at is not None]

    async def state(self) -> dict[str, Any]:
        """The page's `guide`: the team line, the time line and the suggestions."""
        return {
            "team": team_line(self.team),
            "timing": timing_line(await self.durations(), local=self.local),
            "suggestions": [{"label": s.label, "text": s.text, "shows": s.shows} for s in SUGGESTIONS],
        }
