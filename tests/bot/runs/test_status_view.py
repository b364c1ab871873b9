"""The status message's view (`orchestrator.RunView`): a pure fold over run events, as Slack shows it."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator import RunView
from orchestrator import events as ev

AGENTS = (
    ev.AgentInfo(agent_id="a1", label="agent1", backend="openai", model="gpt-5"),
    ev.AgentInfo(agent_id="a2", label="agent2", backend="anthropic", model="claude"),
)
T0 = 1_800_000_000.0


def started() -> ev.RunStarted:
    return ev.RunStarted(
        run_id="run-1", seq=1, at=T0, task="fix the flaky test", agents=AGENTS, requester="U0REQ"
    )


def fold(*events: ev.RunEvent) -> RunView:
    view = RunView.initial(task="placeholder", requester="U0REQ", now=T0 - 5)
    for event in events:
        view = view.apply(event)
    return view


def test_start_sets_task_agents_and_phase() -> None:
    view = fold(started())
    assert (view.run_id, view.task, view.phase, view.started_at) == (
        "run-1",
        "fix the flaky test",
        "coordinating",
        T0,
    )
    assert [(a.agent_id, a.model, a.status) for a in view.agents] == [
        ("a1", "gpt-5", "waiting"),
        ("a2", "claude", "waiting"),
    ]
    assert view.running


def test_apply_returns_a_new_view_and_keeps_the_old_one() -> None:
    before = fold(started())
    after = before.apply(ev.AgentStatus(run_id="run-1", seq=2, agent_id="a1", status="thinking"))
    assert before.agent("a1").status == "waiting"  # type: ignore[union-attr]
    assert after.agent("a1").status == "thinking"  # type: ignore[union-attr]
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.phase = "done"  # type: ignore[misc]


AGENT_CASES: list[tuple[ev.RunEvent, dict[str, object]]] = [
    (
        ev.AnswerSubmitted(agent_id="a1", label="agent1.1", content="x"),
        {"answers": 1, "latest_answer": "agent1.1", "status": "answered"},
    ),
    (
        ev.VoteCast(agent_id="a1", voted_for="a2", voted_for_label="agent2.1", reason="r"),
        {"voted_for": "agent2.1", "status": "voted"},
    ),
    (ev.AgentFailed(agent_id="a1", reason="quota"), {"status": "failed", "detail": "quota"}),
    (ev.AgentStatus(agent_id="a1", status="tool", detail="shell"), {"status": "tool", "detail": "shell"}),
    (
        ev.UsageUpdated(
            agent_id="a1",
            input_tokens=10,
            output_tokens=5,
            cost_usd=0.5,
            run_input_tokens=30,
            run_output_tokens=7,
            run_cost_usd=0.9,
        ),
        {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.5},
    ),
]


@pytest.mark.parametrize(("event", "expected"), AGENT_CASES, ids=[type(c[0]).__name__ for c in AGENT_CASES])
def test_agent_card_updates(event: ev.RunEvent, expected: dict[str, object]) -> None:
    card = fold(started(), event).agent("a1")
    assert card is not None
    assert {k: getattr(card, k) for k in expected} == expected


def test_usage_updates_run_totals() -> None:
    view = fold(started(), AGENT_CASES[-1][0])
    assert (view.input_tokens, view.output_tokens, view.cost_usd) == (30, 7, 0.9)


def test_restart_clears_the_vote() -> None:
    vote = ev.VoteCast(agent_id="a1", voted_for="a2", voted_for_label="agent2.1", reason="r")
    view = fold(
        started(), vote, ev.AgentRestarted(agent_id="a1", reason="new answer", new_answers=("agent2.2",))
    )
    assert view.agent("a1").voted_for is None  # type: ignore[union-attr]


def test_approvals_pending_until_resolved() -> None:
    ask = ev.ToolApprovalRequested(
        agent_id="a2",
        request_id="req-1",
        action="command(rm -rf x)",
        risk="high",
        layer="risk",
        reason="deletes",
        expires_at=T0 + 600,
    )
    view = fold(started(), ask)
    assert [p.request_id for p in view.pending] == ["req-1"]
    assert view.agent("a2").status == "awaiting_approval"  # type: ignore[union-attr]
    done = view.apply(
        ev.ToolApprovalResolved(agent_id="a2", request_id="req-1", status="approved", decided_by="U1")
    )
    assert done.pending == ()


@pytest.mark.parametrize(
    ("terminal", "outcome", "check"),
    [
        (
            ev.RunFinished(
                at=T0 + 90,
                winner="a2",
                answer="42",
                tally={"a2": 2},
                cost_usd=1.5,
                input_tokens=100,
                output_tokens=20,
            ),
            "finished",
            lambda v: v.winner == "a2" and dict(v.tally) == {"a2": 2} and v.cost_usd == 1.5,
        ),
        (
            ev.RunFailed(at=T0 + 90, reasons={"run": "all agents failed"}),
            "failed",
            lambda v: dict(v.failure) == {"run": "all agents failed"},
        ),
        (ev.RunCancelled(at=T0 + 90, by="U0BOSS"), "cancelled", lambda v: v.cancelled_by == "U0BOSS"),
    ],
)
def test_terminal_events_end_the_run(terminal: ev.RunEvent, outcome: str, check: object) -> None:
    ask = ev.ToolApprovalRequested(
        agent_id="a2",
        request_id="req-1",
        action="x",
        risk="low",
        layer="risk",
        reason="r",
        expires_at=T0 + 600,
    )
    view = fold(started(), ask, terminal)
    assert (view.outcome, view.phase, view.running, view.pending) == (outcome, "done", False, ())
    assert view.elapsed(now=T0 + 1000) == 90  # frozen at the end
    assert check(view)  # type: ignore[operator]


def test_consensus_moves_to_presenting() -> None:
    view = fold(started(), ev.ConsensusReached(winner="a1", winner_label="agent1.2", tally={"a1": 2}))
    assert (view.phase, view.winner, view.winner_label) == ("presenting", "a1", "agent1.2")


def test_events_without_view_changes_only_advance_seq() -> None:
    view = fold(started())
    # Streamed text only feeds the terminal's "latest" column (each card's tail) in the one fold.
    later = view.apply(
        ev.ToolCalled(run_id="run-1", seq=7, agent_id="a1", call_id="c1", tool="read_file", arguments={})
    )
    assert later == dataclasses.replace(view, last_seq=7)


def test_fold_of_serialised_log_matches_live_fold() -> None:
    log: list[ev.RunEvent] = [
        started(),
        AGENT_CASES[0][0],
        AGENT_CASES[1][0],
        ev.RunFinished(winner="a2", answer="ok"),
    ]
    replayed = [ev.from_json(ev.to_json(e)) for e in log]
    assert fold(*replayed) == fold(*log)
