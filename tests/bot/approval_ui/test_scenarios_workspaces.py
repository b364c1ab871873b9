"""Approvers and workspaces: a Free workspace's missing user groups, and users of other companies."""

from __future__ import annotations

from pathlib import Path

from approvals.models import Approvers
from bot.playground.emulator import Fault
from bot.playground.payloads import block_actions, encode_interactive
from bot.render import ids
from tests.bot.approval_ui.test_scenarios_modals import _ask_group
from tests.bot.harness import APPROVER, bot_harness


async def test_a_free_workspace_refusal_names_approver_groups_as_the_cause(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request = await _ask_group(bot)
        bot.services.approval_ui._groups.forget()  # posting the ask (its DM copies) looked the group up
        bot.slack.inject(
            "usergroups.users.list", Fault(error="plan_upgrade_required", status=200, retry_after=None)
        )
        await bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER)
        await bot.settle()
        assert (await bot.services.approvals.get(request.id)).status == "pending"  # type: ignore[union-attr]
        (told,) = bot.ephemerals(APPROVER)
        assert "approver groups" in told
        assert "`S0OPS`" in told
        assert "plan_upgrade_required" in told
        assert "paid Slack plan" in told
        assert Approvers(groups=frozenset({"S0OPS"})) == request.approvers


async def test_a_user_of_another_workspace_never_counts_as_an_approver(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request = await _ask_group(bot)  # APPROVER is in S0OPS...
        for action_id in (ids.APPROVE_ONCE, ids.DENY):
            click = block_actions(action_id, request.id, user=APPROVER)
            click["user"]["team_id"] = "T0OTHERCO"  # ...but clicks from a Slack Connect partner's workspace
            assert (await bot.post(encode_interactive(click)))[0] == 200
        await bot.settle()
        assert (await bot.services.approvals.get(request.id)).status == "pending"  # type: ignore[union-attr]
        told = bot.ephemerals(APPROVER)
        assert len(told) == 2
        assert all("another Slack workspace" in t for t in told)
        assert bot.slack.calls_to("views.open") == []
        trail = await bot.services.approvals.audit_trail(run_id="run-test")
        refused = [e for e in trail if e.outcome == "rejected" and e.actor == APPROVER]
        assert len(refused) == 2
        assert all("T0OTHERCO" in str(e.reason) for e in refused)
        # The same person from this workspace (or an allowed org) decides as usual.
        await bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER)
        assert (await bot.services.approvals.wait(request.id)).status == "approved"
