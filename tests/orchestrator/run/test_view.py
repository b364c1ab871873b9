"""RunView: the one pure fold over run events that every view of a run renders."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator import (
    AgentInfo,
    InMemoryRunStore,
    RunCancelled,
    RunEvent,
    RunFailed,
    RunStarted,
    RunView,
    TextDelta,
    ToolApprovalRequested,
    ToolApprovalResolved,
    ToolDecided,
    start_run,
)
from orchestrator.testing import ScriptedModels, ended, scripted_team

AGENTS = (
    AgentInfo(agent_id="a1", label="agent1", backend="openai", model="gpt-5"),
    AgentInfo(agent_id="a2", label="agent2", backend="claude", model="claude"),
)
STARTED = RunStarted(run_id="run-1", seq=1, at=100.0, task="t", agents=AGENTS, requester="U1")


async def test_a_live_view_and_the_stored_log_agree_with_the_runs_own_state() -> None:
    store = InMemoryRunStore()
    live: list[RunView] = [RunView()]
    handle = await start_run(
        scripted_team(3),
        "fix it",
        models=ScriptedModels(),
        store=store,
        subscribers=[lambda event: live.append(live[-1].apply(event))],
    )
    finished = await ended(handle)
    view = RunView.of(await store.events(handle.run_id))
    assert live[-1] == view
    state, summary = handle.snapshot(), await store.get(handle.run_id)
    assert summary is not None
    assert (view.outcome, view.phase, view.winner) == ("finished", "done", finished.winner)  # type: ignore[union-attr]
    assert (view.cost_usd, view.input_tokens) == (summary.cost_usd, summary.input_tokens)
    assert {a.agent_id: a.answers for a in view.agents} == {
        v.agent_id: v.answers for v in state.agents.values()
    }
    assert all(card.voted_for is not None for card in view.agents)
    assert view.last_seq == summary.last_seq


def test_the_tail_keeps_the_end_of_each_agents_text() -> None:
    view = RunView.of([STARTED, *(TextDelta(agent_id="a1", text="x" * 50 + str(i)) for i in range(3))])
    card = view.agent("a1")
    assert card is not None
    assert len(card.tail) == 80
    assert card.tail.endswith("x2")
    assert view.agent("a2").tail == ""  # type: ignore[union-attr]


def test_pending_approvals_come_and_go_and_an_ending_clears_them() -> None:
    ask = ToolApprovalRequested(
        agent_id="a2", request_id="r1", action="command(make)", risk="medium", layer="risk", reason="?",
        expires_at=200.0,
    )  # fmt: skip
    asked = RunView.of([STARTED, ask])
    assert [p.request_id for p in asked.pending] == ["r1"]
    assert asked.agent("a2").status == "awaiting_approval"  # type: ignore[union-attr]
    answered = asked.apply(ToolApprovalResolved(agent_id="a2", request_id="r1", status="approved"))
    assert answered.pending == ()
    ended = asked.apply(RunCancelled(by="U9", at=150.0))
    assert (ended.pending, ended.outcome, ended.cancelled_by, ended.elapsed(999.0)) == (
        (),
        "cancelled",
        "U9",
        50.0,
    )


@pytest.mark.parametrize(
    ("event", "outcome"),
    [(RunCancelled(by="U1"), "cancelled"), (RunFailed(reasons={"run": "boom"}), "failed")],
)
def test_endings(event: RunEvent, outcome: str) -> None:
    view = RunView.of([STARTED, event])
    assert (view.outcome, view.phase, view.running) == (outcome, "done", False)


def test_views_are_immutable_and_unknown_agents_get_a_card() -> None:
    before = RunView.initial(task="t", requester="U1", now=5.0)
    after = before.apply(TextDelta(run_id="r", seq=3, agent_id="ghost", text="hi"))
    assert before.agents == ()
    assert (after.run_id, after.last_seq, after.label("ghost")) == ("r", 3, "ghost")
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.phase = "done"  # type: ignore[misc]


def decided(action: str, **fields: object) -> ToolDecided:
    base: dict[str, object] = {"decision": "allow", "executed": True, "outcome": "ran", "layer": "rule"}
    base |= fields
    return ToolDecided(
        run_id="run-1", agent_id="a1", call_id=action, tool="run_command", action=action,
        risk="low", reason="why", **base,  # type: ignore[arg-type]
    )  # fmt: skip


def test_actions_keep_what_was_asked_or_did_not_run_cleanly() -> None:
    view = RunView.of(
        [
            STARTED,
            decided("routine"),  # allowed by the engine and ran: not shown
            decided("approved", request_id="r1", exit_code=0),
            decided("floored", decision="deny", executed=False, outcome="denied", layer="floor"),
            decided("broke", outcome="failed", exit_code=2),
            decided("unanswered", decision="deny", executed=False, outcome="expired", request_id="r2"),
            decided("old log", decision="deny", executed=False, outcome=None),  # before `outcome` existed
        ]
    )
    assert [(a.action, a.outcome, a.exit_code, a.asked) for a in view.actions] == [
        ("approved", "ran", 0, True),
        ("floored", "denied", None, False),
        ("broke", "failed", 2, False),
        ("unanswered", "expired", None, True),
        ("old log", "denied", None, False),
    ]
    # Unmet: asked and not run, or ran and failed (an engine refusal the agent worked around is not).
    assert [a.action for a in view.actions if a.unmet] == ["broke", "unanswered"]
