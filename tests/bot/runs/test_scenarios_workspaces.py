"""Other workspaces: users of another company (a Slack Connect channel) cannot use this bot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.playground.payloads import app_mention, encode_form, encode_json, slash_command
from tests.bot.harness import CHANNEL, REQUESTER, bot_harness

OTHER = "T0OTHERCO"
GUEST = "U0GUEST"


def _connect_mention(text: str) -> dict[str, Any]:
    """A mention in a channel shared with another company: our team's envelope, their user."""
    body = app_mention(text, user=GUEST)
    body["event"]["user_team"] = body["event"]["team"] = OTHER
    body["event"]["source_team"] = OTHER
    body["is_ext_shared_channel"] = True
    return body


async def test_a_slash_command_from_another_workspace_is_refused_and_starts_nothing(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        body = encode_form(slash_command("deploy the billing service", user=GUEST, team=OTHER))
        status, reply = await bot.post(body)
        assert status == 200
        assert "serves its own workspace only" in reply
        await bot.settle()
        assert await bot.services.runs.history.recent() == []
        assert bot.provider.requests == []
        assert bot.posts() == []


async def test_a_mention_by_a_slack_connect_user_is_refused_privately(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        assert (await bot.post(encode_json(_connect_mention("run the migrations"))))[0] == 200
        await bot.settle()
        assert await bot.services.runs.history.recent() == []
        (told,) = bot.ephemerals(GUEST)
        assert "serves its own workspace only" in told
        # Our own people in the same shared channel still can.
        assert await bot.command("summarise the incident", user=REQUESTER, channel=CHANNEL) == (200, "")
        await bot.settle()
        assert [r.requester for r in await bot.services.runs.history.recent()] == [REQUESTER]


async def test_the_home_tab_of_a_user_of_another_workspace_shows_only_the_refusal(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        await bot.command("a task with private details")
        await bot.settle()
        body = {
            "token": "legacy",
            "team_id": "T0001",
            "api_app_id": "A0001",
            "type": "event_callback",
            "event_id": "EvHomeGuest",
            "event_time": 1,
            "event": {"type": "app_home_opened", "user": GUEST, "user_team": OTHER, "tab": "home"},
        }
        assert (await bot.post(encode_json(body)))[0] == 200
        await bot.settle()
        (call,) = [c for c in bot.slack.calls_to("views.publish", ok=True) if c.params["user_id"] == GUEST]
        shown = str(call.params["view"])
        assert "serves its own workspace only" in shown
        assert "private details" not in shown


@pytest.mark.parametrize(("allowed", "admitted"), [(f"T0001, {OTHER}", True), ("T0001", False)])
async def test_slack_allowed_team_ids_names_the_served_workspaces(
    tmp_path: Path, monkeypatch: Any, allowed: str, admitted: bool
) -> None:
    monkeypatch.setenv("SLACK_ALLOWED_TEAM_IDS", allowed)
    async with bot_harness(tmp_path) as bot:
        _, reply = await bot.post(encode_form(slash_command("status", user=GUEST, team=OTHER)))
        assert ("serves its own workspace only" in reply) is not admitted
        await bot.settle()
