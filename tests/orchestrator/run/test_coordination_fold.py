"""The coordination fold: pure, table-driven; and a run's persisted log folds back into its state."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator import start_run
from orchestrator.events import (
    AgentFailed,
    AgentInfo,
    AgentStatus,
    AnswerSubmitted,
    RunEvent,
    RunStarted,
    VoteCast,
)
from orchestrator.run.coordination import CoordinationState, rebuild_state
from orchestrator.store import InMemoryRunStore
from orchestrator.testing import ScriptedModels, ended, scripted_team


def started(n: int = 3) -> RunStarted:
    agents = tuple(
        AgentInfo(agent_id=f"a{i}", label=f"agent{i + 1}", backend="openai", model="m") for i in range(n)
    )
    return RunStarted(task="t", agents=agents)


def ans(agent: str, label: str) -> AnswerSubmitted:
    return AnswerSubmitted(agent_id=agent, label=label, content=f"content {label}")


def vote(agent: str, target: str) -> VoteCast:
    return VoteCast(agent_id=agent, voted_for=target, voted_for_label="", reason="")


def fold(*events: RunEvent) -> CoordinationState:
    return rebuild_state([started(), *events])


@pytest.mark.parametrize(
    ("events", "winner", "tie_break"),
    [
        ([ans("a0", "agent1.1"), ans("a1", "agent2.1"), vote("a0", "a1"), vote("a1", "a1")], "a1", False),
        # 1-1 tie: a1's answer was submitted first, so it wins.
        ([ans("a1", "agent2.1"), ans("a0", "agent1.1"), vote("a0", "a0"), vote("a1", "a1")], "a1", True),
        # 1-1 tie, a0 first.
        ([ans("a0", "agent1.1"), ans("a1", "agent2.1"), vote("a0", "a0"), vote("a1", "a1")], "a0", True),
        # A revision makes an answer newer: a0's current answer (agent1.2) is younger than a1's.
        (
            [
                ans("a0", "agent1.1"),
                ans("a1", "agent2.1"),
                ans("a0", "agent1.2"),
                vote("a0", "a0"),
                vote("a1", "a1"),
            ],
            "a1",
            True,
        ),
        # A failed voter's vote does not count.
        (
            [
                ans("a0", "agent1.1"),
                ans("a1", "agent2.1"),
                vote("a2", "a1"),
                vote("a0", "a0"),
                AgentFailed(agent_id="a2", reason="x"),
            ],
            "a0",
            False,
        ),
    ],
)
def test_leader_and_tie_break(events: list[RunEvent], winner: str, tie_break: bool) -> None:
    leader = fold(*events).leader()
    assert leader is not None
    assert leader.agent_id == winner
    assert (leader.tie_break is not None) == tie_break


def test_new_answer_resets_votes_and_convergence() -> None:
    state = fold(ans("a0", "agent1.1"), vote("a1", "a0"), vote("a2", "a0"), vote("a0", "a0"))
    assert state.converged
    assert state.tally() == {"a0": 3}
    state = state.apply(ans("a1", "agent2.1"))
    assert not state.converged
    assert state.tally() == {}
    assert all(view.vote is None for view in state.agents.values())


@pytest.mark.parametrize(
    ("events", "agent", "expected"),
    [
        ([], "a0", True),  # first turn
        ([ans("a0", "agent1.1")], "a0", False),  # answered; peers still on their first answer
        ([ans("a0", "agent1.1"), ans("a1", "agent2.1")], "a0", False),  # a2 still working
        ([ans("a0", "agent1.1"), ans("a1", "agent2.1"), AgentFailed(agent_id="a2", reason="x")], "a0", True),
        ([ans("a0", "agent1.1"), ans("a1", "agent2.1"), ans("a2", "agent3.1")], "a0", True),
        (
            [ans("a0", "agent1.1"), ans("a1", "agent2.1"), ans("a2", "agent3.1"), vote("a0", "a1")],
            "a0",
            False,
        ),
        ([AgentFailed(agent_id="a0", reason="x")], "a0", False),
    ],
)
def test_may_start_turn(events: list[RunEvent], agent: str, expected: bool) -> None:
    assert fold(*events).may_start_turn(agent, max_rounds=8) is expected


def test_max_rounds_blocks_further_turns() -> None:
    state = fold(ans("a0", "agent1.1"), ans("a1", "agent2.1"), ans("a2", "agent3.1"), ans("a0", "agent1.2"))
    assert state.may_start_turn("a0", max_rounds=3)
    assert not state.may_start_turn("a0", max_rounds=2)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("agent2", "a1"),
        ("agent2.1", "a1"),
        ("a1", "a1"),
        (" agent2 ", "a1"),
        ("agent3", None),
        ("nobody", None),
    ],
)
def test_vote_targets_map_back_to_real_ids(target: str, expected: str | None) -> None:
    assert fold(ans("a0", "agent1.1"), ans("a1", "agent2.1")).resolve_vote_target(target) == expected


def test_unseen_answers_follow_turn_starts() -> None:
    state = fold(ans("a0", "agent1.1"), ans("a1", "agent2.1"))
    assert state.unseen("a0") == ["agent2.1"]
    state = state.apply(AgentStatus(agent_id="a0", status="thinking", seen=("agent1.1", "agent2.1")))
    assert state.unseen("a0") == []
    assert state.apply(ans("a1", "agent2.2")).unseen("a0") == ["agent2.2"]


@pytest.mark.parametrize(
    ("events", "source", "label"),
    [
        ([ans("a0", "agent1.1"), ans("a1", "agent2.1")], "latest_answer", "agent2.1"),
        ([ans("a0", "agent1.1"), ans("a1", "agent2.1"), vote("a2", "a0")], "most_voted", "agent1.1"),
        ([], None, None),
    ],
)
def test_salvage_choice(events: list[RunEvent], source: str | None, label: str | None) -> None:
    choice = fold(*events).salvage()
    assert (choice.source if choice else None) == source
    assert (choice.label if choice else None) == label


def test_apply_does_not_mutate() -> None:
    before = fold(ans("a0", "agent1.1"))
    after = before.apply(vote("a1", "a0"))
    assert before.agents["a1"].vote is None
    assert after.agents["a1"].vote == "a0"


async def test_persisted_events_fold_back_into_the_live_state() -> None:
    store = InMemoryRunStore()
    handle = await start_run(scripted_team(3), "task", models=ScriptedModels(), store=store)
    await ended(handle)
    events = await store.events(handle.run_id)
    assert events[-1].kind == "finished"
    assert rebuild_state(events) == handle.snapshot()


_steps = st.lists(
    st.one_of(
        st.tuples(st.just("answer"), st.integers(0, 3), st.just(0)),
        st.tuples(st.just("vote"), st.integers(0, 3), st.integers(0, 3)),
        st.tuples(st.just("fail"), st.integers(0, 3), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(_steps)
def test_fold_invariants(steps: list[tuple[str, int, int]]) -> None:
    """Whatever the order of answers, votes and failures, the fold's bookkeeping stays consistent."""
    state = rebuild_state([started(4)])
    for kind, who, target in steps:
        agent, other = f"a{who}", f"a{target}"
        if kind == "answer" and state.agents[agent].live:
            state = state.apply(ans(agent, state.next_label(agent)))
            assert all(view.vote is None for view in state.agents.values())
        elif kind == "vote" and state.agents[agent].live and other in state.latest:
            state = state.apply(vote(agent, other))
        elif kind == "fail":
            state = state.apply(AgentFailed(agent_id=agent, reason="x"))
        tally = state.tally()
        assert sum(tally.values()) == sum(view.vote is not None for view in state.live)
        assert all(target in state.latest for target in tally)
        leader = state.leader()
        if tally:
            assert leader is not None
            assert tally[leader.agent_id] == max(tally.values())
        assert state.converged == (
            bool(state.live) and bool(state.latest) and len(tally) > 0 and all(v.vote for v in state.live)
        )
        assert state.answer_count == sum(view.answers for view in state.agents.values())
