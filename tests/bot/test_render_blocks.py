"""Every Block Kit builder, validated like Slack would (emulator validator + slack_sdk models)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient

from bot.render import help_text, ids
from bot.render.blocks import (
    ApprovalView,
    agent_failed_blocks,
    answer_blocks,
    answer_modal,
    approval_decided_blocks,
    approval_details_modal,
    approval_expired_blocks,
    approval_request_blocks,
    deny_reason_modal,
    final_answer_messages,
    home_view,
    restart_blocks,
    status_blocks,
    tool_batch_blocks,
    vote_blocks,
    vote_ignored_blocks,
)
from bot.runview import RunView
from orchestrator import events as ev
from tests.fakes.slack_blockkit import (
    find_mentions,
    iter_texts,
    validate_blocks,
    validate_text,
    validate_view,
)
from tests.fakes.slack_emulator import SlackEmulator

NOW = 1_800_000_000.0
EVIL = "<!channel> @here <@U0EVIL> <https://evil.example|click> & sk-ant-api03-SECRETSECRETSECRET"
ALLOWED = {"U0REQ", "U0APPROVER", "U0OTHER", "U0BOSS"}


def running_view() -> RunView:
    agents = tuple(
        ev.AgentInfo(agent_id=f"a{i}", label=f"agent{i}", backend="openai", model=f"model-{i}")
        for i in range(1, 4)
    )
    events: list[ev.RunEvent] = [
        ev.RunStarted(
            run_id="run-7", seq=1, at=NOW - 65, task=f"fix the tests {EVIL}", agents=agents, requester="U0REQ"
        ),
        ev.AgentStatus(agent_id="a1", status="tool", detail="shell"),
        ev.AnswerSubmitted(agent_id="a2", label="agent2.1", content="answer"),
        ev.VoteCast(agent_id="a3", voted_for="a2", voted_for_label="agent2.1", reason="best"),
        ev.ApprovalRequested(
            agent_id="a1",
            request_id="req-9",
            action="command(git push --force)",
            risk="high",
            layer="rule",
            reason="pushes",
            expires_at=NOW + 600,
        ),
        ev.UsageUpdated(
            agent_id="a1",
            input_tokens=1200,
            output_tokens=300,
            cost_usd=0.02,
            run_input_tokens=5000,
            run_output_tokens=900,
            run_cost_usd=0.05,
        ),
    ]
    view = RunView.initial(task="", requester="U0REQ", now=NOW - 70)
    for event in events:
        view = view.apply(event)
    return view


def approval(**changes: Any) -> ApprovalView:
    base = ApprovalView(
        request_id="req-9",
        agent_id="a1",
        action="command(git push --force origin main)",
        risk="high",
        reason=f"rewrites history {EVIL}",
        layer="rule",
        rule="ask: git push*",
        expires_at=NOW + 900,
    )
    return dataclasses.replace(base, **changes)


def assert_valid_message(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    text, blocks = rendered
    assert validate_text(text) == []
    assert validate_blocks(blocks) == []
    for block in blocks:
        assert Block.parse(block) is not None
    assert find_mentions([text, *iter_texts(blocks)], ALLOWED) == []
    assert "SECRETSECRET" not in str(rendered)


def assert_valid_view(view: dict[str, Any]) -> None:
    assert validate_view(view) == []
    View(**view).to_dict()  # slack_sdk's own validators (raise on a broken view)
    assert find_mentions(list(iter_texts(view)), ALLOWED) == []


def buttons(blocks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["action_id"], e["value"]) for b in blocks if b["type"] == "actions" for e in b["elements"]]


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


def test_approval_request_for_a_phone() -> None:
    text, blocks = approval_request_blocks(
        approval(), approver_ids=["U0APPROVER", "U0OTHER", "<!here>"], now=NOW
    )
    assert_valid_message((text, blocks))
    assert text.startswith("<@U0APPROVER> <@U0OTHER> Approval needed")  # the notification rings phones
    assert buttons(blocks) == [
        (ids.APPROVE_ONCE, "req-9"),
        (ids.APPROVE_RUN, "req-9"),
        (ids.DENY, "req-9"),
        (ids.DETAILS, "req-9"),
    ]
    approve = blocks[3]["elements"][0]
    assert "confirm" in approve
    assert "```\ncommand(git push --force origin main)\n```" in blocks[1]["text"]["text"]
    assert "<!date^1800000900^" in str(blocks)
    assert "(in 15m 00s)" in str(blocks)
    assert "ask: git push*" in str(blocks)


@pytest.mark.parametrize(
    ("changes", "expect_confirm", "expect_actions"),
    [
        ({"risk": "low"}, False, [ids.APPROVE_ONCE, ids.APPROVE_RUN, ids.DENY, ids.DETAILS]),
        ({"risk": "critical", "scopes": ("once",)}, True, [ids.APPROVE_ONCE, ids.DENY, ids.DETAILS]),
    ],
)
def test_approval_buttons_follow_risk_and_scopes(
    changes: dict[str, Any], expect_confirm: bool, expect_actions: list[str]
) -> None:
    _, blocks = approval_request_blocks(approval(**changes), approver_ids=["U0APPROVER"], now=NOW)
    assert [a for a, _ in buttons(blocks)] == expect_actions
    assert ("confirm" in blocks[3]["elements"][0]) is expect_confirm


def test_long_action_is_truncated_with_details_pointer() -> None:
    _, blocks = approval_request_blocks(approval(action="x" * 9000), approver_ids=[], now=NOW)
    assert_valid_message(("t", blocks))
    assert "tap Details" in blocks[1]["text"]["text"]


@pytest.mark.parametrize(
    ("changes", "phrase"),
    [
        (
            {"status": "approved", "decided_by": "U0APPROVER", "scope": "once"},
            "Approved by <@U0APPROVER> (once) at",
        ),
        ({"status": "approved", "decided_by": "U0APPROVER", "scope": "run"}, "(for this run)"),
        (
            {"status": "denied", "decided_by": "U0APPROVER", "decision_reason": "not on main <!here>"},
            "Denied by <@U0APPROVER> at",
        ),
        ({"status": "expired"}, "Expired at"),
        ({"status": "cancelled"}, "Cancelled"),
    ],
)
def test_decided_and_expired_rewrites_have_no_buttons(changes: dict[str, Any], phrase: str) -> None:
    view = approval(**changes)
    rendered = approval_decided_blocks(view, now=NOW + 60)
    assert_valid_message(rendered)
    assert buttons(rendered[1]) == []
    assert phrase in rendered[1][0]["text"]["text"]


def test_expired_blocks_say_denied() -> None:
    text, blocks = approval_expired_blocks(approval(status="expired"), now=NOW + 2000)
    assert_valid_message((text, blocks))
    assert "denied" in blocks[0]["text"]["text"]


def test_modals_are_valid_views() -> None:
    details = approval_details_modal(approval(action="y" * 20_000), now=NOW)
    assert_valid_view(details)
    assert details["callback_id"] == ids.DETAILS_MODAL
    code = [b["text"]["text"] for b in details["blocks"] if b["type"] == "section" and "text" in b]
    assert sum(t.count("y") for t in code) == 20_000
    deny = deny_reason_modal("req-9")
    assert_valid_view(deny)
    assert (deny["callback_id"], deny["private_metadata"]) == (ids.DENY_MODAL, "req-9")
    assert deny["blocks"][1]["block_id"] == ids.DENY_REASON_BLOCK
    full = answer_modal("agent2.1", "# Big\n" + "line of text\n" * 40_000)
    assert_valid_view(full)
    assert "Truncated" in str(full["blocks"][-1])


def test_home_view_with_many_approvals_and_runs() -> None:
    @dataclasses.dataclass
    class Run:
        run_id: str
        channel: str
        task: str
        state: str
        created_at: float

    pending = [approval(request_id=f"req-{i}", risk="low" if i % 2 else "high") for i in range(14)]
    runs = [Run(f"run-{i}", "C0GENERAL", f"task {i} {EVIL}", "finished", NOW - i * 60) for i in range(20)]
    view = home_view(pending, runs, now=NOW)
    assert_valid_view(view)
    assert "and 4 more" in str(view["blocks"])
    assert "<#C0GENERAL>" in str(view["blocks"])
    assert_valid_view(home_view([], [], now=NOW))


def test_help_text_is_plain_mrkdwn() -> None:
    text = help_text()
    assert "/massgen" in text
    assert find_mentions([text]) == []


async def test_everything_posts_cleanly_to_the_emulator() -> None:
    async with SlackEmulator(allowed_mentions=set(ALLOWED)) as slack:
        client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
        view = running_view()
        messages = [
            status_blocks(view, now=NOW),
            approval_request_blocks(approval(), approver_ids=["U0APPROVER"], now=NOW),
            approval_decided_blocks(
                approval(status="approved", decided_by="U0APPROVER", scope="once"), now=NOW
            ),
            *final_answer_messages(ev.RunFinished(winner="a2", answer="**done** " * 3000), view),
        ]
        for i, (text, blocks) in enumerate(messages):  # one channel each: raw posts are not paced here
            await client.chat_postMessage(channel=f"C0RUN{i}", text=text, blocks=blocks)
        await client.views_open(trigger_id="1.2", view=deny_reason_modal("req-9"))
        await client.views_publish(user_id="U0APPROVER", view=home_view([approval()], [], now=NOW))
        slack.assert_clean()
        assert len(slack.calls_to("chat.postMessage", ok=True)) == len(messages)


def test_approver_mentions_ring_users_and_groups_and_never_inject() -> None:
    from bot.render.blocks import approver_mentions

    assert approver_mentions(["U0A", "U0A", "W0B"], ["S0OPS"]) == "<@U0A> <@W0B> <!subteam^S0OPS>"
    # Anything that is not a plain id is dropped, never turned into a live mention.
    assert approver_mentions(["here", "<!channel>", "u0lower"], ["!everyone", "S0X>|x"]) == ""
