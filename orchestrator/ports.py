"""Ports the runner consumes: the per-run toolbox (tools, sandbox, permission gate) and its context.

The tools engineer implements `RunTools`/`AgentToolbox` (`orchestrator/toolbox.py: build_run_tools`);
`orchestrator/testing.py` has small fakes. The run store port lives in `orchestrator/store.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from orchestrator.config import TeamConfig
from orchestrator.events import RunEvent
from orchestrator.llm.base import ToolCall, ToolSpec

# Tools run while agents compete (`coordination`) or while the winner writes the final answer (`final`).
# Side-effect actions (push, publish, post) are deferred during coordination and run only in `final`,
# so N agents never push N times.
ToolPhase = Literal["coordination", "final"]
Emit = Callable[[RunEvent], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """What the model sees as the tool result."""

    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RunContext:
    """What a toolbox needs to know about its run. `emit` stamps and records events (ToolCalled, ...)."""

    run_id: str
    team: TeamConfig
    agent_ids: tuple[str, ...]
    requester: str | None
    emit: Emit


class AgentToolbox(Protocol):
    """One agent's tools (not the workflow tools `new_answer`/`vote`, which the runner owns)."""

    def specs(self, phase: ToolPhase) -> Sequence[ToolSpec]:
        """The tools offered to the model in this phase."""
        ...

    async def call(self, call: ToolCall, *, phase: ToolPhase) -> ToolOutcome:
        """Run one call through the permission gate; may wait for a human while other agents keep working.

        Emits its own ToolCalled/ToolDecided/Approval* events via the context's `emit`.
        """
        ...


class RunTools(Protocol):
    """The tools of a whole run: one toolbox per agent plus the winner's workspace diff."""

    def for_agent(self, agent_id: str) -> AgentToolbox:
        """The toolbox of `agent_id` (each agent has its own workspace)."""
        ...

    async def winner_patch(self, agent_id: str) -> str | None:
        """Unified diff of the agent's workspace against the source, or None when nothing changed."""
        ...

    async def close(self) -> None:
        """Release workspaces and cancel pending approvals."""
        ...


@runtime_checkable
class PatchApplier(Protocol):
    """Run tools that can write a patch back to the team's source (optional: `RunTools` need not)."""

    async def apply_patch(self, agent_id: str, patch: str) -> ToolOutcome:
        """Apply `patch` for `agent_id` through the permission gate; all or nothing, never raises."""
        ...


RunToolsFactory = Callable[[RunContext], Awaitable[RunTools]]
