"""A run's messages (status, thread posts, final answer), validated like Slack would."""

from __future__ import annotations

import pytest

from bot.render import ids
from bot.runs.blocks import (
    agent_failed_blocks,
    answer_blocks,
    final_answer_messages,
    restart_blocks,
    status_blocks,
    tool_batch_blocks,
    vote_blocks,
    vote_ignored_blocks,
)
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


@pytest.mark.parametrize(("length", "show_full"), [(100, False), (5000, True)])
def test_answer_preview_and_show_full(length: int, show_full: bool) -> None:
    content = "```\n" + "x = 1\n" * (length // 6) + "```\n" + EVIL
    rendered = answer_blocks(
        ev.AnswerSubmitted(agent_id="a2", label="agent2.1", content=content), run_id="run-7"
    )
    assert_valid_message(rendered)
    expected = [(ids.ANSWER_FULL, "run-7:agent2.1")] if show_full else []
    assert buttons(rendered[1]) == expected
    preview = rendered[1][1]["text"]["text"]
    assert preview.count("```") % 2 == 0


def test_thread_milestones_render() -> None:
    view = running_view()
    for rendered in [
        vote_blocks(
            ev.VoteCast(agent_id="a3", voted_for="a2", voted_for_label="agent2.1", reason=EVIL), view
        ),
        vote_ignored_blocks(ev.VoteIgnored(agent_id="a3", voted_for="a2", reason=EVIL), view),
        restart_blocks(ev.AgentRestarted(agent_id="a1", reason=EVIL, new_answers=("agent2.1",)), view),
        agent_failed_blocks(ev.AgentFailed(agent_id="a1", reason=EVIL * 100), view),
    ]:
        assert_valid_message(rendered)


def test_tool_batch_lists_decisions() -> None:
    decisions = [
        ev.ToolDecided(
            agent_id="a1",
            call_id=str(i),
            tool="shell",
            action=f"command(echo `{i}` {EVIL})",
            decision="deny" if i % 2 else "allow",
            risk="low",
            layer="rule",
            reason="r",
            executed=not i % 2,
        )
        for i in range(14)
    ]
    text, blocks = tool_batch_blocks(decisions, running_view())
    assert_valid_message((text, blocks))
    assert text == "14 tool calls"
    assert "and 4 more" in str(blocks)
    assert "not run" in str(blocks)


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
