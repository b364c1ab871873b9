"""What a run's status message shows, as a pure fold over the run's events.

`RunView.apply(event)` returns a new view; the renderer turns views into blocks. Folding the
persisted event log rebuilds the view after a restart, so the status message can be refreshed
without the live run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from orchestrator.events import (
    AgentFailed,
    AgentRestarted,
    AgentStatus,
    AnswerSubmitted,
    ApprovalRequested,
    ApprovalResolved,
    ConsensusReached,
    FinalDelta,
    RunCancelled,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    UsageUpdated,
    VoteCast,
)


def _empty() -> MappingProxyType[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCard:
    """One agent as the status message shows it."""

    agent_id: str
    label: str
    backend: str = ""
    model: str = ""
    status: str = "waiting"
    detail: str = ""
    answers: int = 0
    latest_answer: str | None = None  # e.g. "agent2.1"
    voted_for: str | None = None  # answer label the agent currently votes for
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    request_id: str
    agent_id: str
    action: str
    risk: str
    expires_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """Immutable snapshot of a run for rendering (see the module docstring)."""

    run_id: str = ""
    task: str = ""
    requester: str | None = None
    agents: tuple[AgentCard, ...] = ()
    phase: str = "starting"  # starting, coordinating, presenting, done
    started_at: float = 0.0
    finished_at: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    pending: tuple[PendingApproval, ...] = ()
    outcome: str | None = None  # None while running; "finished", "failed" or "cancelled"
    winner: str | None = None  # agent id
    winner_label: str | None = None
    tally: MappingProxyType[str, int] = field(default_factory=_empty)
    salvage: str | None = None
    failure: MappingProxyType[str, Any] = field(default_factory=_empty)  # agent id (or "run") -> reason
    cancelled_by: str | None = None
    last_seq: int = 0

    @classmethod
    def initial(cls, *, task: str, requester: str | None = None, now: float = 0.0) -> RunView:
        """The view before the run emits anything (the first status message)."""
        return cls(task=task, requester=requester, started_at=now)

    @property
    def running(self) -> bool:
        return self.outcome is None

    def elapsed(self, now: float) -> float:
        """Seconds since the run started (frozen once it ended)."""
        end = self.finished_at if self.finished_at is not None else now
        return max(0.0, end - self.started_at) if self.started_at else 0.0

    def agent(self, agent_id: str) -> AgentCard | None:
        return next((a for a in self.agents if a.agent_id == agent_id), None)

    def label(self, agent_id: str) -> str:
        """The agent's display label (its id when unknown)."""
        card = self.agent(agent_id)
        return card.label if card is not None else agent_id

    def _with_agent(self, agent_id: str, **changes: Any) -> RunView:
        agents = self.agents
        if self.agent(agent_id) is None:
            agents = (*agents, AgentCard(agent_id=agent_id, label=agent_id))
        agents = tuple(replace(a, **changes) if a.agent_id == agent_id else a for a in agents)
        return replace(self, agents=agents)

    def _end(self, event: RunEvent, outcome: str, **changes: Any) -> RunView:
        return replace(
            self, outcome=outcome, phase="done", finished_at=event.at or None, pending=(), **changes
        )

    def apply(self, event: RunEvent) -> RunView:
        """The view after `event`; unknown or irrelevant events return it unchanged (but sequenced)."""
        view = replace(self, last_seq=max(self.last_seq, event.seq), run_id=self.run_id or event.run_id)
        return view._fold(event)

    def _fold(self, event: RunEvent) -> RunView:  # one flat dispatch over the event union
        match event:
            case RunStarted():
                cards = tuple(
                    AgentCard(agent_id=a.agent_id, label=a.label, backend=a.backend, model=a.model)
                    for a in event.agents
                )
                started = event.at or self.started_at
                requester = event.requester or self.requester
                return replace(
                    self,
                    task=event.task,
                    requester=requester,
                    agents=cards,
                    phase="coordinating",
                    started_at=started,
                )
            case AgentStatus():
                return self._with_agent(event.agent_id, status=event.status, detail=event.detail)
            case AnswerSubmitted():
                card = self.agent(event.agent_id)
                count = (card.answers if card else 0) + 1
                return self._with_agent(
                    event.agent_id, answers=count, latest_answer=event.label, status="answered"
                )
            case VoteCast():
                return self._with_agent(event.agent_id, voted_for=event.voted_for_label, status="voted")
            case AgentRestarted():
                return self._with_agent(event.agent_id, voted_for=None, status="thinking", detail="restarted")
            case AgentFailed():
                return self._with_agent(event.agent_id, status="failed", detail=event.reason)
            case UsageUpdated():
                view = self._with_agent(
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
            case ApprovalRequested():
                pending = PendingApproval(
                    request_id=event.request_id,
                    agent_id=event.agent_id,
                    action=event.action,
                    risk=event.risk,
                    expires_at=event.expires_at,
                )
                view = self._with_agent(event.agent_id, status="awaiting_approval")
                return replace(view, pending=(*self.pending, pending))
            case ApprovalResolved():
                return replace(
                    self, pending=tuple(p for p in self.pending if p.request_id != event.request_id)
                )
            case ConsensusReached():
                return replace(
                    self,
                    phase="presenting",
                    winner=event.winner,
                    winner_label=event.winner_label,
                    tally=MappingProxyType(dict(event.tally)),
                )
            case FinalDelta():
                return replace(self, phase="presenting", winner=self.winner or event.agent_id)
            case RunFinished():
                return self._finished(event)
            case RunFailed():
                return self._end(event, "failed", failure=MappingProxyType(dict(event.reasons)))
            case RunCancelled():
                return self._end(event, "cancelled", cancelled_by=event.by)
        return self

    def _finished(self, event: RunFinished) -> RunView:
        tally = MappingProxyType(dict(event.tally)) if event.tally else self.tally
        totals = {}
        if event.input_tokens or event.output_tokens or event.cost_usd:
            totals = {
                "input_tokens": event.input_tokens,
                "output_tokens": event.output_tokens,
                "cost_usd": event.cost_usd,
            }
        return self._end(event, "finished", winner=event.winner, tally=tally, salvage=event.salvage, **totals)
