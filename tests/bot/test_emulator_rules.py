"""The emulator's real-Slack rules: scopes per token, membership, trigger_id expiry, view size,
response_url semantics, answers after the client's timeout, several Socket Mode connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.playground import payloads
from bot.playground.emulator import ALL_SCOPES, SlackEmulator, manifest_scopes
from tests.bot.test_emulator_bolt import make_app

MODAL = {"type": "modal", "title": {"type": "plain_text", "text": "Hi"}, "blocks": []}


class Clock:
    """A hand-moved clock for the emulator."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def slack(clock: Clock) -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator(clock=clock, scopes=ALL_SCOPES) as emulator:
        yield emulator


@pytest.fixture
def client(slack: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=slack.api_url)


async def error_of(call: Any) -> str:
    with pytest.raises(SlackApiError) as info:
        await call
    return str(info.value.response["error"])


async def test_default_token_has_the_manifest_scopes_and_a_missing_one_is_a_violation() -> None:
    async with SlackEmulator() as slack:
        assert slack.token_scopes["xoxb-test"] == manifest_scopes()
    async with SlackEmulator(scopes={"chat:write"}) as slack:
        client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
        assert await error_of(client.conversations_history(channel="C0001")) == "missing_scope"
        assert await error_of(client.conversations_replies(channel="G0001", ts="1.0")) == "missing_scope"
        assert [v.split("needs ")[1].rstrip(")") for v in slack.violations] == [
            "channels:history",
            "groups:history",
        ]


async def test_membership_decides_ephemerals_history_and_public_posts(
    slack: SlackEmulator, client: AsyncWebClient
) -> None:
    slack.add_channel("C0OUT", bot_member=False)
    slack.add_channel("G0PRIV", private=True, bot_member=False)
    slack.add_channel("D0DM", im=True, bot_member=False)
    for channel, error in [
        ("C0OUT", "not_in_channel"),
        ("G0PRIV", "channel_not_found"),
        ("D0DM", "channel_not_found"),
    ]:
        assert await error_of(client.chat_postEphemeral(channel=channel, user="U0A", text="x")) == error
        assert await error_of(client.conversations_history(channel=channel)) == error
    assert (await client.chat_postMessage(channel="C0OUT", text="public, chat:write.public"))["ok"]
    assert await error_of(client.chat_postMessage(channel="G0PRIV", text="x")) == "channel_not_found"
    slack.token_scopes["xoxb-test"] = ALL_SCOPES - {"chat:write.public"}
    assert await error_of(client.chat_postMessage(channel="C0OUT", text="x")) == "not_in_channel"
    slack.add_channel("C0IN", members={"U0A"})
    assert (
        await error_of(client.chat_postEphemeral(channel="C0IN", user="U0B", text="x"))
        == "user_not_in_channel"
    )
    assert (await client.chat_postEphemeral(channel="C0IN", user="U0A", text="x"))["ok"]
    assert slack.violations == []


async def test_trigger_ids_expire_after_three_seconds_and_are_single_use(
    slack: SlackEmulator, client: AsyncWebClient, clock: Clock
) -> None:
    trigger = slack.issue_trigger()
    clock.now += 2.9
    assert (await client.views_open(trigger_id=trigger, view=MODAL))["ok"]
    assert await error_of(client.views_open(trigger_id=trigger, view=MODAL)) == "exchanged_trigger_id"
    late = slack.issue_trigger()
    clock.now += 3.01
    assert await error_of(client.views_open(trigger_id=late, view=MODAL)) == "expired_trigger_id"
    assert await error_of(client.views_open(trigger_id="1.2.3", view=MODAL)) == "invalid_trigger_id"
    fresh = payloads.block_actions("details", "r1")["trigger_id"]  # builders' ids carry their time
    assert (await client.views_open(trigger_id=fresh, view=MODAL))["ok"]


async def test_trigger_ttl_is_configurable(clock: Clock) -> None:
    async with SlackEmulator(trigger_ttl=0.5, clock=clock) as slack:
        client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
        trigger = slack.issue_trigger()
        clock.now += 0.6
        assert await error_of(client.views_open(trigger_id=trigger, view=MODAL)) == "expired_trigger_id"


async def test_a_view_over_250_kb_is_refused(slack: SlackEmulator, client: AsyncWebClient) -> None:
    big = {**MODAL, "private_metadata": "", "blocks": [], "external_id": "x" * 260_000}
    assert await error_of(client.views_open(trigger_id=slack.issue_trigger(), view=big)) == "view_too_large"
    home = {"type": "home", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}] * 101}
    assert await error_of(client.views_publish(user_id="U0A", view=home)) == "invalid_blocks"
    assert any("view_too_large" in v for v in slack.violations)


async def test_response_url_five_uses_replace_delete_and_ephemeral_default(
    slack: SlackEmulator, client: AsyncWebClient, clock: Clock
) -> None:
    root = await client.chat_postMessage(channel="C0001", text="request")
    url = slack.response_url("k", channel="C0001", message_ts=root["ts"], user="U0A")
    async with aiohttp.ClientSession() as http:

        async def send(body: dict[str, Any]) -> tuple[int, str]:
            async with http.post(url, json=body) as response:
                return response.status, await response.text()

        assert await send({"text": "only you"}) == (200, "ok")
        assert slack.ephemerals[-1]["user"] == "U0A"
        assert slack.ephemerals[-1]["via"] == "response_url"
        assert await send({"text": "edited", "replace_original": True}) == (200, "ok")
        assert slack.messages["C0001"][root["ts"]]["text"] == "edited"
        assert await send({"text": "everyone", "response_type": "in_channel"}) == (200, "ok")
        assert [m["text"] for m in slack.messages["C0001"].values()] == ["edited", "everyone"]
        assert await send({"delete_original": True}) == (200, "ok")
        assert root["ts"] not in slack.messages["C0001"]
        assert await send({"text": "5th"}) == (200, "ok")
        assert await send({"text": "6th"}) == (404, "used_url")
        assert len(slack.responses["k"]) == 5
        old = slack.response_url("old")
        clock.now += 30 * 60 + 1
        async with http.post(old, json={"text": "late"}) as response:
            assert (response.status, await response.text()) == (404, "expired_url")


async def test_answer_late_performs_the_call_but_the_client_times_out(slack: SlackEmulator) -> None:
    # slack_sdk annotates `timeout` as int; aiohttp takes the float.
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url, timeout=0.2)  # type: ignore[arg-type]
    slack.answer_late("chat.postMessage", 0.6)
    with pytest.raises((TimeoutError, asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        await client.chat_postMessage(channel="C0001", text="did it arrive?")
    assert [m["text"] for m in slack.messages["C0001"].values()] == ["did it arrive?"]
    await slack.wait_for(lambda: len(slack.calls_to("chat.postMessage")) == 1, 2.0)


async def test_envelopes_are_spread_over_socket_connections_round_robin() -> None:
    async with SlackEmulator() as slack:
        handlers = [AsyncSocketModeHandler(make_app(slack), app_token="xapp-test") for _ in range(2)]
        for handler in handlers:
            await handler.connect_async()
        try:
            await slack.wait_for(lambda: slack.socket_connections == 2)
            for i in range(4):
                ack = await slack.socket_send("slash_commands", payloads.slash_command(f"job {i}"))
                assert ack == {"text": f"on it: job {i}"}
            assert slack.socket_deliveries == [1, 2, 1, 2]
        finally:
            for handler in handlers:
                await handler.close_async()
        slack.assert_clean()
