"""Deny and Details open their modal at once (a trigger_id lives 3 s and works once), then fill it in.

The emulator refuses `views.open` with a trigger older than 3 s (`expired_trigger_id`) or used
before (`exchanged_trigger_id`); a group lookup slowed past 3 s would have made both modals fail.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from approvals.models import ApprovalRequest, Approvers
from bot.approval_ui import ThreadApprovalPort
from bot.playground.emulator import Fault
from bot.playground.payloads import block_actions, encode_interactive
from bot.render import ids
from tests.bot.harness import APPROVER, CHANNEL, INTRUDER, REQUESTER, BotHarness, bot_harness, command_ask

SLOW_LOOKUP = 3.5  # seconds: past the trigger's 3 s life


async def _ask_group(bot: BotHarness, command: str = "git push origin main") -> ApprovalRequest:
    bot.slack.usergroups["S0OPS"] = [APPROVER]
    bot.slack.allowed_mentions.add("S0OPS")
    root = bot.services.outbox.post(CHANNEL, text="a run")
    port = ThreadApprovalPort(bot.services.approvals, CHANNEL, root)
    request = await port.request(command_ask(command, approvers=Approvers(groups=frozenset({"S0OPS"}))))
    await bot.settle()
    return request


def _slow_group_lookup(bot: BotHarness) -> None:
    bot.services.approval_ui._groups.forget()
    bot.slack.inject("usergroups.users.list", Fault(error=None, commit=True, delay=SLOW_LOOKUP))


def _updated_views(bot: BotHarness) -> list[dict[str, Any]]:
    return [c.params["view"] for c in bot.slack.calls_to("views.update", ok=True)]


async def test_deny_opens_its_modal_before_a_slow_group_lookup(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request = await _ask_group(bot)
        _slow_group_lookup(bot)
        await bot.click(ids.DENY, request.id, user=APPROVER)
        decided = await asyncio.wait_for(bot.services.approvals.wait(request.id), 10)
        assert (decided.status, decided.decided_by) == ("denied", APPROVER)
        await bot.wait_for(lambda: any(v["callback_id"] == ids.DENY_MODAL for v in _updated_views(bot)))
        opened = bot.slack.calls_to("views.open")
        assert [c.error for c in opened] == [None]  # opened with a fresh trigger, before the lookup
        lookup = bot.slack.calls_to("usergroups.users.list")[0]
        assert opened[0].at < lookup.at + SLOW_LOOKUP
        reason_modal = _updated_views(bot)[-1]
        assert reason_modal["private_metadata"] == request.id
        assert ids.DENY_REASON_BLOCK in str(reason_modal["blocks"])


async def test_details_from_home_opens_before_a_slow_group_lookup(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request = await _ask_group(bot, command="kubectl rollout restart deploy/api")
        _slow_group_lookup(bot)
        click = block_actions(ids.DETAILS, request.id, user=APPROVER, view={"id": "VH1", "type": "home"})
        await bot.post(encode_interactive(click))
        await bot.wait_for(lambda: bool(_updated_views(bot)), 10)
        assert [c.error for c in bot.slack.calls_to("views.open")] == [None]
        details = _updated_views(bot)[-1]
        assert details["callback_id"] == ids.DETAILS_MODAL
        assert "kubectl rollout restart deploy/api" in str(details["blocks"])


async def test_refused_deny_says_so_in_the_modal_and_a_decided_one_from_home_too(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request = await _ask_group(bot)
        await bot.click(ids.DENY, request.id, user=INTRUDER)
        await bot.wait_for(lambda: bool(_updated_views(bot)))
        assert "not authorised" in str(_updated_views(bot)[-1])
        assert (await bot.services.approvals.get(request.id)).status == "pending"  # type: ignore[union-attr]
        await bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER)
        await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)
        # A Deny from the App Home on a decided request: there is no channel to reply in, the modal says it.
        home = block_actions(ids.DENY, request.id, user=APPROVER, view={"id": "VH1", "type": "home"})
        await bot.post(encode_interactive(home))
        await bot.wait_for(lambda: len(_updated_views(bot)) == 2)
        assert "already decided" in str(_updated_views(bot)[-1])
        assert bot.ephemerals(APPROVER) == []


async def test_an_action_too_long_for_slack_is_never_approvable_there(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request = await _ask_group(bot, command="echo " + "&<>" * 100_000)
        posted = next(c for c in bot.slack.calls_to("chat.postMessage") if request.id in str(c.params))
        assert ids.APPROVE_ONCE not in str(posted.params["blocks"])
        assert f"massgen-bot approvals show {request.id}" in str(posted.params["blocks"])
        await bot.click(ids.DETAILS, request.id, user=APPROVER)
        await bot.wait_for(lambda: bool(_updated_views(bot)))
        assert "Cannot be approved in Slack" in str(_updated_views(bot)[-1])
        # A forged Approve click (no such button was shown) is refused; nothing changes.
        await bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER)
        await bot.settle()
        assert (await bot.services.approvals.get(request.id)).status == "pending"  # type: ignore[union-attr]
        assert any("Cannot be approved in Slack" in t for t in bot.ephemerals(APPROVER))


async def test_an_ask_slack_never_showed_is_denied_at_once_and_said_in_the_thread(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        bot.slack.add_channel(CHANNEL, members={REQUESTER, APPROVER})  # no DM copy: only the thread
        root = bot.services.outbox.post(CHANNEL, text="a run")
        thread = await root.ts()
        bot.slack.inject("chat.postMessage", Fault(error="channel_not_found", status=200, retry_after=None))
        port = ThreadApprovalPort(bot.services.approvals, CHANNEL, root)
        request = await port.request(command_ask("git push", reason="x", timeout=600))
        # Not 600 s of waiting for nobody: the agent learns of the denial as soon as the outbox gives up.
        ended = await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)
        assert ended.status == "cancelled"
        assert "could not be posted in Slack" in str(ended.decision_reason)
        await bot.settle()
        notes = [str(c.params["text"]) for c in bot.posts(thread=thread)]
        assert any("could not be posted here" in t and "denied at once" in t for t in notes)
        trail = await bot.services.approvals.audit_trail(run_id="run-test")
        assert [(e.outcome, e.actor) for e in trail if e.request_id == request.id][-1] == (
            "cancelled",
            "engine",
        )
