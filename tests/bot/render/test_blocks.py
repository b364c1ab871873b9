"""Every room's surfaces together: modals, help text, and a post of each to the emulator."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.approval_ui.blocks import (
    approval_decided_blocks,
    approval_details_modal,
    approval_request_blocks,
    deny_reason_modal,
)
from bot.home.blocks import home_view
from bot.playground.blockkit import (
    find_mentions,
)
from bot.playground.emulator import SlackEmulator
from bot.render import ids
from bot.runs import help_text
from bot.runs.blocks import (
    answer_modal,
    final_answer_messages,
    status_blocks,
)
from orchestrator import events as ev
from tests.bot.blockkit import (
    ALLOWED,
    NOW,
    approval,
    assert_valid_view,
    running_view,
)


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
        await client.views_open(trigger_id=slack.issue_trigger(), view=deny_reason_modal("req-9"))
        await client.views_publish(user_id="U0APPROVER", view=home_view([approval()], [], now=NOW))
        slack.assert_clean()
        assert len(slack.calls_to("chat.postMessage", ok=True)) == len(messages)
