"""App Home "Recent runs": a viewer sees their own runs, public channels' and their channels' only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.playground.payloads import encode_json
from tests.bot.harness import APPROVER, INTRUDER, REQUESTER, BotHarness, bot_harness

PRIVATE = "G0PRIVATE"
DM = "D0REQUESTER"


def _home_opened(user: str) -> dict[str, Any]:
    return {
        "token": "legacy",
        "team_id": "T0001",
        "api_app_id": "A0001",
        "type": "event_callback",
        "event_id": f"EvRuns{user}",
        "event_time": 1,
        "event": {"type": "app_home_opened", "user": user, "tab": "home", "event_ts": "1.0"},
    }


async def _recent_runs_of(bot: BotHarness, user: str) -> str:
    assert (await bot.post(encode_json(_home_opened(user))))[0] == 200
    await bot.settle()
    calls = bot.slack.calls_to("views.publish", ok=True)
    views = [c.params["view"] for c in calls if c.params["user_id"] == user]
    return str(views[-1])


async def test_a_non_member_sees_neither_private_channel_nor_dm_runs_in_the_home_tab(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        bot.slack.add_channel(PRIVATE, private=True, members={REQUESTER, APPROVER, "U0BOT"})
        bot.slack.add_channel(DM, im=True, members={REQUESTER, "U0BOT"})
        await bot.command("public: tidy the changelog")
        await bot.command("private: the acquisition memo", channel=PRIVATE)
        await bot.command("dm: my performance review", channel=DM)
        await bot.settle()
        outsider = await _recent_runs_of(bot, INTRUDER)
        assert "tidy the changelog" in outsider
        assert "acquisition memo" not in outsider
        assert "performance review" not in outsider
        member = await _recent_runs_of(bot, APPROVER)
        assert "acquisition memo" in member
        assert "performance review" not in member  # a DM's runs: its requester only
        requester = await _recent_runs_of(bot, REQUESTER)
        for task in ("tidy the changelog", "acquisition memo", "performance review"):
            assert task in requester
