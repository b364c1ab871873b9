"""Approvers who cannot see the run's thread get a DM copy with the same buttons, kept in sync."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from approvals.models import ApprovalRequest, Approvers
from bot.approval_ui import ThreadApprovalPort
from bot.playground.payloads import block_actions, encode_interactive
from bot.render import ids
from tests.bot.harness import APPROVER, REQUESTER, BotHarness, bot_harness, command_ask

PRIVATE = "G0PRIV"


async def _ask(
    bot: BotHarness, channel: str = PRIVATE, approvers: Approvers | None = None
) -> ApprovalRequest:
    root = bot.services.outbox.post(channel, text="a run")
    port = ThreadApprovalPort(bot.services.approvals, channel, root)
    request = await port.request(command_ask(approvers=approvers))
    await bot.settle()
    return request


def _buttons(message: dict[str, Any]) -> list[str]:
    return [
        e["action_id"] for b in message.get("blocks") or [] if b["type"] == "actions" for e in b["elements"]
    ]


def _copies(bot: BotHarness, request_id: str) -> dict[str, dict[str, Any]]:
    """Every message (by channel) that carries this request."""
    return {
        channel: msg
        for channel, msgs in bot.slack.messages.items()
        for msg in msgs.values()
        if request_id in str(msg.get("blocks"))
    }


async def test_an_approver_outside_a_private_run_channel_approves_from_a_dm(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        bot.slack.add_channel(PRIVATE, private=True, members={REQUESTER})
        request = await _ask(bot)
        copies = _copies(bot, request.id)
        dms = [c for c in copies if c != PRIVATE]
        assert len(dms) == 1, copies
        dm = dms[0]
        assert _buttons(copies[dm]) == _buttons(copies[PRIVATE])  # the same buttons
        assert ids.APPROVE_ONCE in _buttons(copies[dm])
        click = block_actions(
            ids.APPROVE_ONCE, request.id, user=APPROVER, channel=dm, message_ts=copies[dm]["ts"]
        )
        assert (await bot.post(encode_interactive(click)))[0] == 200
        decided = await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)
        assert (decided.status, decided.decided_by) == ("approved", APPROVER)
        await bot.settle()
        for channel, message in _copies(bot, request.id).items():
            assert _buttons(message) == [], channel  # both copies lost their buttons...
            assert "Approved" in message["text"], channel  # ...and show the outcome


async def test_members_of_the_run_channel_get_no_dm_unless_always(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with bot_harness(tmp_path) as bot:
        bot.slack.add_channel(PRIVATE, private=True, members={REQUESTER, APPROVER})
        request = await _ask(bot)
        assert list(_copies(bot, request.id)) == [PRIVATE]
        assert bot.slack.calls_to("conversations.open") == []
    monkeypatch.setenv("MASSGEN_APPROVAL_DMS", "always")
    (tmp_path / "always").mkdir()
    async with bot_harness(tmp_path / "always") as bot:
        bot.slack.add_channel(PRIVATE, private=True, members={REQUESTER, APPROVER})
        request = await _ask(bot)
        assert len(_copies(bot, request.id)) == 2
        await bot.services.approvals.cancel_run("run-test", "the run was cancelled")
        await bot.settle()
        for message in _copies(bot, request.id).values():
            assert _buttons(message) == []
            assert "Cancelled" in str(message["blocks"])


async def test_never_sends_no_dm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASSGEN_APPROVAL_DMS", "never")
    async with bot_harness(tmp_path) as bot:
        bot.slack.add_channel(PRIVATE, private=True, members={REQUESTER})
        request = await _ask(bot)
        assert list(_copies(bot, request.id)) == [PRIVATE]
        assert bot.slack.calls_to("conversations.members") == []


async def test_a_run_in_the_requesters_dm_copies_the_ask_to_the_approver(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        bot.slack.add_channel("D0REQDM", im=True, members={REQUESTER})
        request = await _ask(bot, channel="D0REQDM")
        assert len(_copies(bot, request.id)) == 2  # the requester's DM and the approver's
        assert bot.slack.calls_to("conversations.members") == []  # no im:read needed: nobody else is there
