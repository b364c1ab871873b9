"""A run's messages (status, thread posts, final answer), validated like Slack would."""

from __future__ import annotations

import pytest

from bot.render import ids
from bot.runs.blocks import final_answer_messages, status_blocks
from bot.runs.progress import Progress, progress_blocks
from orchestrator import RunView
from orchestrator import events as ev
from tests.bot.blockkit import (
    EVIL,
    NOW,
    assert_valid_message,
    buttons,
    running_view,
)


def test_status_while_running_has_controls_with_run_id_only() -> None:
    text, blocks = status_blocks(running_view(), now=NOW)
    assert_valid_message((text, blocks))
    assert buttons(blocks) == [(ids.RUN_FINISH_NOW, "run-7"), (ids.RUN_CANCEL, "run-7")]
    shown = str(blocks)
    for fact in ("model-1", "agent2.1", "1m 05s", "5.9k tokens", "$0.0500", "<@U0REQ>", "git push --force"):
        assert fact in shown, fact


@pytest.mark.parametrize(
    ("terminal", "phrase"),
    [
        (ev.RunFinished(at=NOW, winner="a2", answer="x", tally={"a2": 2}), "winner *agent2*"),
        (ev.RunFailed(at=NOW, reasons={"a1": "quota <!here>"}), "*Failed*: agent1: quota &lt;!here&gt;"),
        (ev.RunCancelled(at=NOW, by="U0BOSS"), "*Cancelled* by <@U0BOSS>"),
    ],
)
def test_status_when_over_has_outcome_and_no_buttons(terminal: ev.RunEvent, phrase: str) -> None:
    rendered = status_blocks(running_view().apply(terminal), now=NOW + 100)
    assert_valid_message(rendered)
    assert buttons(rendered[1]) == []
    assert phrase in str(rendered[1])


def test_initial_status_before_the_run_has_an_id() -> None:
    rendered = status_blocks(RunView.initial(task="do it", requester="U0REQ", now=NOW), now=NOW)
    assert_valid_message(rendered)
    assert buttons(rendered[1]) == []


def test_status_with_many_agents_stays_valid() -> None:
    agents = tuple(
        ev.AgentInfo(agent_id=f"a{i}", label=f"agent{i}", backend="x", model="m") for i in range(25)
    )
    view = RunView().apply(ev.RunStarted(run_id="r", task="t", agents=agents))
    assert_valid_message(status_blocks(view, now=NOW))


def _decision(i: int, *, decision: str = "allow", executed: bool = True, reason: str = "r") -> ev.ToolDecided:
    return ev.ToolDecided(
        agent_id="a1",
        call_id=str(i),
        tool="shell",
        action=f"command(echo `{i}` {EVIL})",
        decision=decision,  # type: ignore[arg-type]
        risk="low",
        layer="rule",
        reason=reason,
        executed=executed,
    )


def test_progress_message_folds_every_milestone_into_one_valid_message() -> None:
    view = running_view()
    progress = Progress()
    long_answer = "```\n" + "x = 1\n" * 900 + "```\n" + EVIL
    events: list[ev.RunEvent] = [
        ev.AnswerSubmitted(agent_id="a2", label="agent2.1", content=long_answer),
        ev.VoteCast(agent_id="a3", voted_for="a2", voted_for_label="agent2.1", reason=EVIL),
        ev.VoteIgnored(agent_id="a3", voted_for="a2", reason=EVIL),
        ev.AgentRestarted(agent_id="a1", reason=EVIL, new_answers=("agent2.1",)),
        ev.AgentFailed(agent_id="a1", reason=EVIL * 100),
        *[_decision(i, decision="deny" if i % 2 else "allow", executed=not i % 2) for i in range(14)],
    ]
    assert all(progress.add(e, view) for e in events)
    assert not progress.add(ev.AgentStatus(agent_id="a1", status="thinking"), view)
    text, blocks = progress_blocks(progress, view)
    assert_valid_message((text, blocks))
    assert "1 answer · 1 vote · 14 tool calls (7 ran, 7 refused)" in text
    assert buttons(blocks) == [(ids.ANSWER_FULL, "run-7:agent2.1")]
    shown = str(blocks)
    assert "newest 5 of 14" in shown
    assert "not run" in shown
    assert "x = 1" * 2 not in shown.replace("\\n", "")  # a preview, not the whole answer


def test_progress_keeps_the_newest_lines_and_counts_the_rest() -> None:
    view = running_view()
    progress = Progress()
    for i in range(40):
        progress.add(ev.AnswerSubmitted(agent_id=f"a{i % 3 + 1}", label=f"agent{i}.1", content=EVIL), view)
    _, blocks = progress_blocks(progress, view)
    assert_valid_message(("t", blocks))
    assert "28 earlier events" in str(blocks)
    assert len(buttons(blocks)) == 3  # one "Show full" per agent: its latest answer


def test_a_deferred_side_effect_reads_as_deferred_to_the_winner_not_a_denial() -> None:
    progress = Progress()
    held = _decision(1, decision="deny", executed=False, reason="deferred: this action has an outside effect")
    progress.add(held, running_view())
    text, blocks = progress_blocks(progress, running_view())
    assert "deferred to the winner" in str(blocks)
    assert "⛔" not in str(blocks)
    assert "1 deferred to the winner" in text


def test_final_answer_is_split_across_valid_messages() -> None:
    answer = "# Result\n" + "\n".join(f"Paragraph {i}: " + "words " * 60 for i in range(60))
    answer += "\n```python\n" + "print('hi')\n" * 800 + "```\n| a | b |\n|---|---|\n| 1 | 2 |\n" + EVIL
    event = ev.RunFinished(
        winner="a2",
        answer=answer,
        tally={"a2": 2, "a3": 1},
        cost_usd=0.42,
        input_tokens=12000,
        output_tokens=3000,
        patch="+new\n-old\n+more\n",
    )
    messages = final_answer_messages(event, running_view().apply(event))
    assert len(messages) > 2
    for text, blocks in messages:
        assert_valid_message((text, blocks))
        assert sum(len(b.get("text", {}).get("text", "")) for b in blocks) <= 10_500
        assert all(b["text"]["text"].count("```") % 2 == 0 for b in blocks if b["type"] == "section")
    first = messages[0][1]
    assert first[0]["type"] == "header"
    assert "agent2 2 · agent3 1" in first[1]["elements"][0]["text"]
    assert "$0.42" in first[1]["elements"][0]["text"]
    assert "3 changed lines" in str(messages[-1][1])
    assert messages[1][0].startswith("Final answer (part 2/")


def test_empty_final_answer_still_renders() -> None:
    assert_valid_message(final_answer_messages(ev.RunFinished(winner=None, answer=""), RunView())[0])


@pytest.mark.parametrize(
    ("terminal", "header"),
    [
        (ev.RunCancelled(at=NOW, by="U0BOSS"), "*MassGen* · Cancelled"),
        (ev.RunFailed(at=NOW, reasons={"a1": "quota"}), "*MassGen* · Failed"),
        (ev.RunFinished(at=NOW, winner="a2", answer="x"), "*MassGen* · Finished"),
    ],
)
def test_an_ended_run_says_how_it_ended_and_no_agent_is_still_working(
    terminal: ev.RunEvent, header: str
) -> None:
    view = running_view().apply(ev.AgentStatus(agent_id="a3", status="thinking", detail="")).apply(terminal)
    rendered = status_blocks(view, now=NOW + 100)
    assert_valid_message(rendered)
    shown = str(rendered[1])
    assert header in shown
    assert "Done" not in shown
    for working in ("thinking", "awaiting approval", "🛠️ tool"):
        assert working not in shown, working
    assert "stopped" in shown


def test_finish_now_reads_as_words_without_stray_italics() -> None:
    finished = ev.RunFinished(at=NOW, winner="a2", answer="x", salvage="finish_now:latest_answer")
    view = running_view().apply(finished)
    shown = str(status_blocks(view, now=NOW + 100)[1]) + str(final_answer_messages(finished, view))
    assert "finish_now" not in shown
    assert "latest_answer" not in shown
    assert "finished early, with the latest answer" in shown
