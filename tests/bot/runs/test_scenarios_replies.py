"""Replies only the asker sees reach them everywhere: through response_url, else an ephemeral."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.playground.payloads import encode_form, slash_command
from bot.render import ids
from tests.bot.harness import INTRUDER, REQUESTER, bot_harness
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply


async def test_status_in_a_channel_the_bot_is_not_in_is_answered_through_response_url(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        bot.slack.add_channel("C0NOTIN", bot_member=False)
        bot.slack.add_channel("G0SECRET", private=True, bot_member=False)
        bot.slack.add_channel("D0DIRECT", im=True, bot_member=False)
        for channel in ("C0NOTIN", "G0SECRET", "D0DIRECT"):
            assert await bot.command("status", channel=channel) == (200, "")
        await bot.settle()
        replies = [e for e in bot.slack.ephemerals if e.get("user") == REQUESTER]
        assert [(e["channel"], e["via"]) for e in replies] == [
            ("C0NOTIN", "response_url"),
            ("G0SECRET", "response_url"),
            ("D0DIRECT", "response_url"),
        ]
        assert all("No runs are active" in e["text"] for e in replies)
        assert not bot.slack.calls_to("chat.postEphemeral")  # it would have failed in all three


async def test_a_spent_response_url_falls_back_to_an_ephemeral(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        hook = bot.slack.response_url("spent", channel="C0CHAN", user=REQUESTER)
        for _ in range(5):  # Slack allows 5 uses of a response_url
            bot.slack.hooks["spent"].uses.append(bot.slack.clock())
        body = encode_form(slash_command("history", channel="C0CHAN", response_url=hook))
        assert (await bot.post(body))[0] == 200
        await bot.settle()
        sent = bot.slack.calls_to("chat.postEphemeral", ok=True)
        assert [c.params["user"] for c in sent] == [REQUESTER]
        assert "No runs in this channel yet" in str(sent[0].params["text"])


async def test_click_feedback_reaches_the_clicker_through_response_url(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def handler(request: ProviderRequest) -> Reply:
        await release.wait()
        return protocol_agent(request)

    async with bot_harness(tmp_path, handler=handler) as bot:
        await bot.command("long task")
        await bot.wait_for(lambda: bool(bot.services.runs.supervisor.active_runs()))
        run_id = bot.services.runs.supervisor.active_runs()[0].handle.run_id
        await bot.click(ids.RUN_CANCEL, run_id, user=INTRUDER)
        await bot.wait_for(lambda: bool(bot.ephemerals(INTRUDER)))
        told = [e for e in bot.slack.ephemerals if e.get("user") == INTRUDER]
        assert told[0]["via"] == "response_url"
        assert "Only the requester or an approver" in told[0]["text"]
        release.set()
        await bot.click(ids.RUN_CANCEL, run_id, user=REQUESTER)
        await bot.settle()
