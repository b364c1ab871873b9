"""What a person watching a run sees, as one pure fold over the run's events: `RunView.apply(event)`.

Every view of a run (the Slack status message, the terminal's live table) renders a `RunView`;
none folds the events itself. Folding a persisted log rebuilds the view after a restart. The
coordination state (`coordination.py`) is the engine's own fold, with rules (vote validity,
restarts) a display does not need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from orchestrator.events import (
    ActionOutcome,
    AgentFailed,
    AgentRestarted,
    AgentState,
    AgentStatus,
    AnswerSubmitted,
    ConsensusReached,
    FinalDelta,
    PullRequest,
    RunCancelled,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolApprovalRequested,
    ToolApprovalResolved,
    ToolDecided,
    UsageUpdated,
    VoteCast,
    WorkspaceRebuilt,
)

ViewPhase = Literal["starting", "coordinating", "presenting", "done"]
Outcome = Literal["finished", "failed", "cancelled"]
TAIL_CHARS = 80  # the latest model text kept per agent (the terminal shows it)


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCard:
    """One agent as a view shows it."""

    agent_id: str
    label: str
    backend: str = ""
    model: str = ""
    status: AgentState = "waiting"
    detail: str = ""  # the tool being run, what is awaited, or why the agent failed
    answers: int = 0
    latest_answer: str | None = None  # e.g. "agent2.1"
    voted_for: str | None = None  # answer label the agent currently votes for
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    tail: str = ""  # the end of the agent's latest model text

    @property
    def failed(self) -> bool:
        """Whether the agent dropped out of the run."""
        return self.status == "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """A tool call of the run waiting for a human."""

    request_id: str
    agent_id: str
    action: str
    risk: str
    expires_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionResult:
    """A tool call worth showing after its decision: asked about, or not run cleanly (denied, failed...)."""

    agent_id: str
    tool: str
    action: str
    outcome: ActionOutcome
    exit_code: int | None = None
    asked: bool = False  # a person was asked to approve it
    reason: str = ""

    @property
    def unmet(self) -> bool:
        """An action a person was asked about that did not run, or any action that ran and failed."""
        return self.outcome == "failed" or (self.asked and self.outcome != "ran")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """Immutable snapshot of a run for rendering (see the module docstring)."""

    run_id: str = ""
    task: str = ""
    requester: str | None = None
    agents: tuple[AgentCard, ...] = ()
    phase: ViewPhase = "starting"
    started_at: float = 0.0
    finished_at: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    pending: tuple[PendingApproval, ...] = ()
    actions: tuple[ActionResult, ...] = ()  # in decision order; routine allowed calls are left out
    outcome: Outcome | None = None  # None while running
    winner: str | None = None  # agent id
    winner_label: str | None = None
    tally: Mapping[str, int] = field(default_factory=_empty)
    salvage: str | None = None
    failure: Mapping[str, str] = field(default_factory=_empty)  # agent id (or "run") -> reason
    cancelled_by: str | None = None
    stopped_by: str | None = None  # who clicked Finish now
    # (agent id, why): workspaces a takeover could not restore and rebuilt from the source
    rebuilt: tuple[tuple[str, str], ...] = ()
    pull_request: PullRequest | None = None  # a run on a repository: what its approved publish made
    last_seq: int = 0

    @classmethod
    def initial(cls, *, task: str, requester: str | None = None, now: float = 0.0) -> RunView:
        """The view before the run emits anything (e.g. the first status message)."""
        return cls(task=task, requester=requester, started_at=now)

    @classmethod
    def of(cls, events: Iterable[RunEvent]) -> RunView:
        """The view of a whole event log (a stored run)."""
        view = cls()
        for event in events:
            view = view.apply(event)
        return view

    @property
    def running(self) -> bool:
        """Whether the run has not ended yet."""
        return self.outcome is None

    def elapsed(self, now: float) -> float:
        """Seconds since the run started (frozen once it ended)."""
        end = self.finished_at if self.finished_at is not None else now
        return max(0.0, end - self.started_at) if self.started_at else 0.0

    def agent(self, agent_id: str) -> AgentCard | None:
        """The card of `agent_id`, if the run has such an agent."""
        return next((a for a in self.agents if a.agent_id == agent_id), None)

    def label(self, agent_id: str) -> str:
        """The agent's display label (its id when unknown)."""
        card = self.agent(agent_id)
        return card.label if card is not None else agent_id

    def apply(self, event: RunEvent) -> RunView:
        """The view after `event`; events a view does not show return it unchanged (but sequenced)."""
        view = replace(self, last_seq=max(self.last_seq, event.seq), run_id=self.run_id or event.run_id)
        fold = _FOLDS.get(type(event))
        return fold(view, event) if fold is not None else view

    def with_agent(self, agent_id: str, **changes: Any) -> RunView:
        """The view with one agent's card changed (an unknown agent gets a card)."""
        agents = self.agents
        if self.agent(agent_id) is None:
            agents = (*agents, AgentCard(agent_id=agent_id, label=agent_id))
        return replace(
            self, agents=tuple(replace(a, **changes) if a.agent_id == agent_id else a for a in agents)
        )


# ---- one small function per event kind (the fold stays flat and each step stays simple) -----------


def _started(view: RunView, event: RunStarted) -> RunView:
    cards = tuple(
        AgentCard(agent_id=a.agent_id, label=a.label, backend=a.backend, model=a.model) for a in event.agents
    )
    return replace(
        view,
        task=event.task,
        requester=event.requester or view.requester,
        agents=cards,
        phase="coordinating",
        started_at=event.at or view.started_at,
    )


def _status(view: RunView, event: AgentStatus) -> RunView:
    return view.with_agent(event.agent_id, status=event.status, detail=event.detail)


def _text(view: RunView, event: TextDelta) -> RunView:
    card = view.agent(event.agent_id)
    tail = ((card.tail if card is not None else "") + event.text)[-TAIL_CHARS:]
    return view.with_agent(event.agent_id, tail=tail)


def _answer(view: RunView, event: AnswerSubmitted) -> RunView:
    card = view.agent(event.agent_id)
    count = (card.answers if card is not None else 0) + 1
    return view.with_agent(event.agent_id, answers=count, latest_answer=event.label, status="answered")


def _vote(view: RunView, event: VoteCast) -> RunView:
    return view.with_agent(event.agent_id, voted_for=event.voted_for_label, status="voted")


def _restart(view: RunView, event: AgentRestarted) -> RunView:
    return view.with_agent(event.agent_id, voted_for=None, status="thinking", detail="restarted")


def _failed_agent(view: RunView, event: AgentFailed) -> RunView:
    return view.with_agent(event.agent_id, status="failed", detail=event.reason)


def _usage(view: RunView, event: UsageUpdated) -> RunView:
    view = view.with_agent(
        event.agent_id,
        input_tokens=event.input_tokens,
        output_tokens=event.output_tokens,
        cost_usd=event.cost_usd,
    )
    return replace(
        view,
        input_tokens=event.run_input_tokens,
        output_tokens=event.run_output_tokens,
        cost_usd=event.run_cost_usd,
    )


def _asked(view: RunView, event: ToolApprovalRequested) -> RunView:
    pending = PendingApproval(
        request_id=event.request_id,
        agent_id=event.agent_id,
        action=event.action,
        risk=event.risk,
        expires_at=event.expires_at,
    )
    view = view.with_agent(event.agent_id, status="awaiting_approval")
    return replace(view, pending=(*view.pending, pending))


def _answered(view: RunView, event: ToolApprovalResolved) -> RunView:
    return replace(view, pending=tuple(p for p in view.pending if p.request_id != event.request_id))


def _decided(view: RunView, event: ToolDecided) -> RunView:
    outcome = event.outcome or ("ran" if event.executed else "denied")  # logs from before `outcome`
    asked = event.request_id is not None
    if outcome == "ran" and not asked:
        return view
    result = ActionResult(
        agent_id=event.agent_id,
        tool=event.tool,
        action=event.action,
        outcome=outcome,
        exit_code=event.exit_code,
        asked=asked,
        reason=event.reason,
    )
    return replace(view, actions=(*view.actions, result))


def _consensus(view: RunView, event: ConsensusReached) -> RunView:
    return replace(
        view,
        phase="presenting",
        winner=event.winner,
        winner_label=event.winner_label,
        tally=MappingProxyType(dict(event.tally)),
    )


def _final_delta(view: RunView, event: FinalDelta) -> RunView:
    return replace(view, phase="presenting", winner=view.winner or event.agent_id)


def _end(view: RunView, event: RunEvent, outcome: Outcome, **changes: Any) -> RunView:
    return replace(view, outcome=outcome, phase="done", finished_at=event.at or None, pending=(), **changes)


def _finished(view: RunView, event: RunFinished) -> RunView:
    tally = MappingProxyType(dict(event.tally)) if event.tally else view.tally
    totals: dict[str, Any] = {}
    if event.input_tokens or event.output_tokens or event.cost_usd:
        totals = {
            "input_tokens": event.input_tokens,
            "output_tokens": event.output_tokens,
            "cost_usd": event.cost_usd,
        }
    return _end(
        view,
        event,
        "finished",
        winner=event.winner,
        tally=tally,
        salvage=event.salvage,
        stopped_by=event.stopped_by,
        pull_request=event.pull_request,
        **totals,
    )


def _failed(view: RunView, event: RunFailed) -> RunView:
    return _end(view, event, "failed", failure=MappingProxyType(dict(event.reasons)))


def _cancelled(view: RunView, event: RunCancelled) -> RunView:
    return _end(view, event, "cancelled", cancelled_by=event.by)


def _rebuilt(view: RunView, event: WorkspaceRebuilt) -> RunView:
    return replace(view, rebuilt=(*view.rebuilt, (event.agent_id, event.reason)))


_FOLDS: dict[type[Any], Callable[[RunView, Any], RunView]] = {
    RunStarted: _started,
    AgentStatus: _status,
    TextDelta: _text,
    AnswerSubmitted: _answer,
    VoteCast: _vote,
    AgentRestarted: _restart,
    AgentFailed: _failed_agent,
    UsageUpdated: _usage,
    ToolApprovalRequested: _asked,
    ToolApprovalResolved: _answered,
    ToolDecided: _decided,
    ConsensusReached: _consensus,
    FinalDelta: _final_delta,
    RunFinished: _finished,
    RunFailed: _failed,
    RunCancelled: _cancelled,
    WorkspaceRebuilt: _rebuilt,
}
