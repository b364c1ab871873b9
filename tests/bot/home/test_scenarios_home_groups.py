"""The App Home of an approver through a user group follows new and decided asks like a listed one's."""

from __future__ import annotations

import asyncio
from pathlib import Path

from approvals.models import Approvers
from bot.playground.payloads import encode_json
from bot.render import ids
from tests.bot.approval_ui.test_scenarios_modals import _ask_group
from tests.bot.harness import APPROVER, BotHarness, bot_harness
from tests.bot.home.test_scenarios_home import _home_opened, _published


def _home_text(bot: BotHarness, user: str) -> str:
    return str(bot.slack.home_views[user]["blocks"])


async def test_a_group_approvers_home_lists_new_asks_and_drops_decided_ones(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        await bot.post(encode_json(_home_opened(APPROVER)))
        await bot.settle()
        before = _published(bot, APPROVER)
        request = await _ask_group(bot, command="terraform apply")  # APPROVER is in S0OPS, not listed
        assert request.approvers == Approvers(groups=frozenset({"S0OPS"}))
        await bot.wait_for(lambda: _published(bot, APPROVER) > before)
        await bot.settle()
        assert "terraform apply" in _home_text(bot, APPROVER)
        shown = _published(bot, APPROVER)
        await bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER)
        await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)
        await bot.wait_for(lambda: _published(bot, APPROVER) > shown)
        await bot.settle()
        assert "terraform apply" not in _home_text(bot, APPROVER)
