"""An ask stored but never posted (its process died between the two) is found and posted once.

The request is written before its post's outbox row, so a kill in between leaves a pending ask
that no one can see; `ApprovalsUI.post_unseen` (at start-up and every sweep) posts it, under the
ask's key so that it is one message whoever posts it, and records a sent post's message when its
ts never was.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sqlalchemy import delete

from approvals import Principal
from approvals.models import ApprovalRequest
from bot.approval_ui import ApprovalsUI, ThreadApprovalPort
from bot.render import ids
from bot.slack.store import bot_approval_messages
from tests.bot.harness import APPROVER, CHANNEL, BotHarness, bot_harness, command_ask


async def _request(bot: BotHarness, thread: str) -> ApprovalRequest:
    port = ThreadApprovalPort(bot.services.approvals, CHANNEL, thread)
    return await port.request(command_ask(run_id="run-unseen", risk="high", reason="pushes code"))


async def _posted(bot: BotHarness) -> tuple[ApprovalRequest, str]:
    """An ask posted as usual in a new run thread: the request and the thread's ts."""
    thread = await bot.services.outbox.post(CHANNEL, text="a run").ts()
    request = await _request(bot, thread)
    await bot.wait_for(lambda: len(bot.posts(thread=thread)) == 1)
    await bot.settle()
    return request, thread


def _rewrites(bot: BotHarness, thread: str) -> list[dict[str, Any]]:
    """The chat.update calls on the ask's message (the thread's last message)."""
    ts = bot.slack.thread(CHANNEL, thread)[-1]["ts"]
    return [c.params for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == ts]


async def test_an_ask_never_posted_is_posted_once_and_its_outcome_shown(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        thread = await bot.services.outbox.post(CHANNEL, text="a run").ts()
        presenter = bot.services.presenter
        presenter.detach()  # as if the process died after storing the ask, before saving its post
        request = await _request(bot, thread)
        presenter.attach()
        await bot.settle()
        assert not bot.posts(thread=thread)

        assert await presenter.post_unseen(min_age=60) == 0  # a live process may be saving it still
        assert await presenter.post_unseen(min_age=0) == 1
        await bot.wait_for(lambda: len(bot.posts(thread=thread)) == 1)
        assert ids.APPROVE_ONCE in str(bot.posts(thread=thread)[0].params["blocks"])
        await bot.settle()
        assert await presenter.post_unseen(min_age=0) == 0
        # Another process's sweep (a presenter of its own) finds it posted, and posts nothing.
        other = ApprovalsUI(bot.services.approvals, bot.services.outbox, bot.services.store, spawn=print)
        assert await other.post_unseen(min_age=0) == 0

        waiter = asyncio.create_task(bot.services.approvals.wait(request.id))
        await bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER)
        assert (await asyncio.wait_for(waiter, 5)).status == "approved"
        await bot.settle()
        updates = _rewrites(bot, thread)
        assert updates, "the decided ask's message was not rewritten"
        assert ids.APPROVE_ONCE not in str(updates[-1]["blocks"])
        assert len(bot.posts(thread=thread)) == 1


async def test_a_sent_ask_whose_message_was_not_recorded_is_recorded_not_posted(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request, thread = await _posted(bot)
        async with bot.services.storage.engine.begin() as conn:  # its ts came back after a restart
            await conn.execute(delete(bot_approval_messages))
        fresh = ApprovalsUI(bot.services.approvals, bot.services.outbox, bot.services.store, spawn=print)
        assert await fresh.post_unseen(min_age=0) == 0
        ts = str(bot.slack.thread(CHANNEL, thread)[-1]["ts"])
        assert await bot.services.store.approval_message(request.id) == (CHANNEL, ts)
        assert len(bot.posts(thread=thread)) == 1


async def test_a_click_on_a_settled_ask_whose_rewrite_was_lost_rewrites_it(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request, thread = await _posted(bot)
        presenter = bot.services.presenter
        presenter.detach()  # decided, then the process died before the message's rewrite was saved
        await bot.services.approvals.decide(request.id, Principal(id=APPROVER), approve=True)
        presenter.attach()
        await bot.settle()
        assert not bot.slack.calls_to("chat.update", ok=True)

        await bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER)  # the buttons are still there
        await bot.settle()
        assert any("already" in text.lower() for text in bot.ephemerals(APPROVER))
        updates = _rewrites(bot, thread)
        assert len(updates) == 1
        assert ids.APPROVE_ONCE not in str(updates[0]["blocks"])
