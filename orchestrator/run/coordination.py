"""Coordination state as a pure fold over run events: answers, votes, convergence, tally, tie-break.

`CoordinationState.apply(event)` returns a new state and never mutates the old one, so the runner's
live state and `rebuild_state(store.events(run_id))` after a crash are the same value. Every
scheduling decision the runner makes is a query on this state.

Rules (MassGen's, with the limits MassGen lacks):
- A new answer clears every vote. A vote counts only if the voter had seen every current answer
  (`seen`, recorded on turn start and on injection); otherwise the runner emits `VoteIgnored`.
- Converged when every live agent holds a vote and at least one answer exists.
- Winner: plurality of live agents' votes. Ties go to the tied agent whose current answer was
  submitted earliest (it stood unchallenged longest), then to team-file order.
- Scheduling: an agent with an answer does not start another turn while a live peer is still on
  its FIRST answer (that answer would reset any vote cast meanwhile); an agent on its first answer
  is never interrupted. Each agent takes at most `max_rounds` coordination turns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from orchestrator.events import (
    AgentFailed,
    AgentRestarted,
    AgentState,
    AgentStatus,
    AnswerSubmitted,
    ConsensusReached,
    FinalDelta,
    RunCancelled,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    UsageUpdated,
    VoteCast,
    VoteIgnored,
)

Phase = Literal["coordinating", "presenting", "done"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """One agent's current answer, with its label and its place among the run's answers."""

    agent_id: str
    label: str  # e.g. "agent2.3"
    content: str
    order: int  # position among all answers of the run, from 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentView:
    """One agent as coordination sees it."""

    agent_id: str
    label: str  # anonymised id shown to peers, e.g. "agent2"
    backend: str = ""
    model: str = ""
    status: AgentState = "waiting"
    answers: int = 0
    vote: str | None = None  # agent id voted for since the last new answer
    vote_label: str | None = None
    vote_reason: str = ""
    turns: int = 0  # coordination turns finished: answers, votes and ignored votes
    seen: frozenset[str] = frozenset()
    failed: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def live(self) -> bool:
        """True until the agent fails."""
        return self.failed is None


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """The answer a run ends with, and why it was picked."""

    agent_id: str
    label: str
    content: str
    source: Literal["consensus", "most_voted", "latest_answer"]
    tie_break: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinationState:
    """One run's coordination, folded from its events: agents, current answers, phase, winner, spend."""

    run_id: str = ""
    task: str = ""
    agents: dict[str, AgentView] = field(default_factory=dict)  # team-file order; never mutated
    latest: dict[str, Answer] = field(default_factory=dict)  # each agent's current answer
    answer_count: int = 0
    phase: Phase = "coordinating"
    winner: str | None = None
    final_text: str = ""
    outcome: str | None = None  # terminal event kind
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    last_seq: int = 0

    # ---- the fold ------------------------------------------------------------------------------

    def apply(self, event: RunEvent) -> CoordinationState:
        """The state after `event`; events that do not change coordination return `self`."""
        state = replace(self, last_seq=event.seq) if event.seq > self.last_seq else self
        match event:
            case RunStarted():
                views = {
                    a.agent_id: AgentView(
                        agent_id=a.agent_id, label=a.label, backend=a.backend, model=a.model
                    )
                    for a in event.agents
                }
                return replace(state, run_id=event.run_id, task=event.task, agents=views)
            case AgentStatus():
                view = state.agents[event.agent_id]
                seen = view.seen | frozenset(event.seen)
                return state._with(replace(view, status=event.status, seen=seen))
            case AgentRestarted():
                view = state.agents[event.agent_id]
                return state._with(replace(view, seen=view.seen | frozenset(event.new_answers)))
            case AnswerSubmitted():
                return state._answer(event)
            case VoteCast():
                view = state.agents[event.agent_id]
                voted = replace(
                    view,
                    vote=event.voted_for,
                    vote_label=event.voted_for_label,
                    vote_reason=event.reason,
                    turns=view.turns + 1,
                    status="voted",
                )
                return state._with(voted)
            case VoteIgnored():
                view = state.agents[event.agent_id]
                return state._with(replace(view, turns=view.turns + 1))
            case AgentFailed():
                view = state.agents[event.agent_id]
                return state._with(replace(view, failed=event.reason, status="failed", vote=None))
            case UsageUpdated():
                view = replace(
                    state.agents[event.agent_id],
                    input_tokens=event.input_tokens,
                    output_tokens=event.output_tokens,
                    cost_usd=event.cost_usd,
                )
                totals = replace(
                    state,
                    input_tokens=event.run_input_tokens,
                    output_tokens=event.run_output_tokens,
                    cost_usd=event.run_cost_usd,
                )
                return totals._with(view)
            case ConsensusReached():
                return replace(state, winner=event.winner, phase="presenting")
            case FinalDelta():
                return replace(state, final_text=state.final_text + event.text)
            case RunFinished() | RunFailed() | RunCancelled():
                winner = event.winner if isinstance(event, RunFinished) else state.winner
                return replace(state, phase="done", outcome=event.kind, winner=winner)
            case _:
                return state

    def _with(self, view: AgentView) -> CoordinationState:
        return replace(self, agents={**self.agents, view.agent_id: view})

    def _answer(self, event: AnswerSubmitted) -> CoordinationState:
        answer = Answer(
            agent_id=event.agent_id, label=event.label, content=event.content, order=self.answer_count
        )
        agents = {}
        for agent_id, view in self.agents.items():
            # A new answer resets every vote; the author has seen its own answer.
            view = replace(view, vote=None, vote_label=None, vote_reason="")
            if agent_id == event.agent_id:
                view = replace(
                    view,
                    answers=view.answers + 1,
                    turns=view.turns + 1,
                    seen=view.seen | {event.label},
                    status="answered",
                )
            agents[agent_id] = view
        latest = {**self.latest, event.agent_id: answer}
        return replace(self, agents=agents, latest=latest, answer_count=self.answer_count + 1)

    # ---- queries -------------------------------------------------------------------------------

    @property
    def live(self) -> list[AgentView]:
        """The agents that have not failed, in team-file order."""
        return [view for view in self.agents.values() if view.live]

    def next_label(self, agent_id: str) -> str:
        """The label the agent's next answer gets, e.g. `agent2.3`."""
        view = self.agents[agent_id]
        return f"{view.label}.{view.answers + 1}"

    def unseen(self, agent_id: str) -> list[str]:
        """Current answer labels the agent has not been shown."""
        seen = self.agents[agent_id].seen
        return [a.label for a in self.latest.values() if a.label not in seen]

    def resolve_vote_target(self, target: str) -> str | None:
        """Map `agent2`, `agent2.1` or a real agent id to the agent id of an agent that has an answer."""
        label = target.strip().split(".", 1)[0]
        for view in self.agents.values():
            if label in (view.label, view.agent_id) and view.agent_id in self.latest:
                return view.agent_id
        return None

    def may_answer(self, agent_id: str, max_answers: int | None) -> bool:
        """False once the agent used its answers: it is then vote-only."""
        return max_answers is None or self.agents[agent_id].answers < max_answers

    def may_start_turn(self, agent_id: str, max_rounds: int) -> bool:
        """Whether the agent should start a coordination turn now (see the module docstring)."""
        view = self.agents[agent_id]
        if not view.live or view.vote is not None or view.turns >= max_rounds or self.phase != "coordinating":
            return False
        if view.answers == 0:
            return True
        return all(peer.answers > 0 for peer in self.live)

    @property
    def converged(self) -> bool:
        """True when every live agent holds a vote and at least one answer exists."""
        live = self.live
        return bool(live) and bool(self.latest) and all(view.vote is not None for view in live)

    def tally(self) -> dict[str, int]:
        """Votes per agent id, counting live voters' current votes only."""
        counts: dict[str, int] = {}
        for view in self.live:
            if view.vote is not None:
                counts[view.vote] = counts.get(view.vote, 0) + 1
        return counts

    def leader(self) -> Choice | None:
        """The plurality winner with the documented tie-break; None when nobody has votes."""
        counts = self.tally()
        if not counts:
            return None
        best = max(counts.values())
        tied = [agent_id for agent_id, n in counts.items() if n == best and agent_id in self.latest]
        if not tied:
            return None
        order = list(self.agents)
        tied.sort(key=lambda agent_id: (self.latest[agent_id].order, order.index(agent_id)))
        winner = self.latest[tied[0]]
        tie_break = None
        if len(tied) > 1:
            names = ", ".join(self.agents[t].label for t in tied)
            tie_break = f"tie between {names}: earliest submitted answer ({winner.label}) wins"
        source: Literal["consensus", "most_voted"] = "consensus" if self.converged else "most_voted"
        return Choice(
            agent_id=winner.agent_id,
            label=winner.label,
            content=winner.content,
            source=source,
            tie_break=tie_break,
        )

    def salvage(self) -> Choice | None:
        """The best answer without consensus: most voted, else the latest submitted; None without answers."""
        leader = self.leader()
        if leader is not None:
            return replace(leader, source="most_voted")
        if not self.latest:
            return None
        answer = max(self.latest.values(), key=lambda a: a.order)
        return Choice(
            agent_id=answer.agent_id, label=answer.label, content=answer.content, source="latest_answer"
        )

    @property
    def round(self) -> int:
        """The furthest coordination turn any agent is on (for display)."""
        return max((view.turns for view in self.agents.values()), default=0)


def rebuild_state(events: Iterable[RunEvent]) -> CoordinationState:
    """Fold a persisted event log back into the coordination state."""
    state = CoordinationState()
    for event in events:
        state = state.apply(event)
    return state
