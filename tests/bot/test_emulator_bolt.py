"""The real Bolt `AsyncApp` against the emulator: Socket Mode, signed HTTP requests, payload builders."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond, AsyncSay
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot.playground import payloads
from bot.playground.emulator import SlackEmulator
from bot.playground.signing import sign

SECRET = "shh-signing-secret"


def make_app(slack: SlackEmulator) -> AsyncApp:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    app = AsyncApp(client=client, signing_secret=SECRET)
    clicks: list[str] = []

    @app.command("/massgen")
    async def command(ack: AsyncAck, command: dict[str, Any]) -> None:
        await ack(text=f"on it: {command['text']}")

    @app.action("approve_once")
    async def approve(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        clicks.append(body["actions"][0]["value"])
        if "127.0.0.1" in body["response_url"]:
            await respond(text="Approved", replace_original=True)

    @app.view("deny_reason")
    async def view(ack: AsyncAck, view: dict[str, Any]) -> None:
        await ack(response_action="clear")

    @app.event("app_mention")
    async def mention(event: dict[str, Any], say: AsyncSay) -> None:
        await say(text="hello from the bot", thread_ts=event["ts"])

    app.clicks = clicks  # type: ignore[attr-defined]
    return app


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator
        emulator.assert_clean()


def test_signature_matches_slack_sdk_verifier() -> None:
    body = payloads.encode_form(payloads.slash_command("run the tests & more"))
    headers = sign(body, SECRET, timestamp=int(time.time()))
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid(body, headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"])
    assert not verifier.is_valid(
        body + b"x", headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"]
    )


async def test_socket_mode_envelopes_reach_bolt_and_acks_come_back(slack: SlackEmulator) -> None:
    app = make_app(slack)
    handler = AsyncSocketModeHandler(app, app_token="xapp-test")
    await handler.connect_async()
    try:
        ack = await slack.socket_send("slash_commands", payloads.slash_command("fix the flaky test"))
        assert ack == {"text": "on it: fix the flaky test"}
        await slack.socket_send("interactive", payloads.block_actions("approve_once", "req-42"))
        assert app.clicks == ["req-42"]  # type: ignore[attr-defined]
        await slack.socket_send("events_api", payloads.app_mention("help", ts="1700000000.000100"))
        await slack.wait_for(lambda: bool(slack.calls_to("chat.postMessage")))
    finally:
        await handler.close_async()
    post = slack.calls_to("chat.postMessage")[0]
    assert (post.params["text"], post.params["thread_ts"]) == ("hello from the bot", "1700000000.000100")
    assert slack.calls_to("apps.connections.open")


async def dispatch(app: AsyncApp, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    request = AsyncBoltRequest(body=body.decode(), headers={k.lower(): [v] for k, v in headers.items()})
    response = await app.async_dispatch(request)
    return response.status, response.body


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (payloads.encode_form(payloads.slash_command("go")), "on it: go"),
        (payloads.encode_interactive(payloads.block_actions("approve_once", "req-1")), ""),
        (
            payloads.encode_interactive(payloads.view_submission("deny_reason", {})),
            '{"response_action": "clear"}',
        ),
        (payloads.encode_json(payloads.url_verification("abc")), '{"challenge": "abc"}'),
    ],
    ids=["slash", "block_actions", "view_submission", "url_verification"],
)
async def test_signed_http_requests_are_accepted(slack: SlackEmulator, body: bytes, expect: str) -> None:
    status, text = await dispatch(make_app(slack), body, payloads.signed_request(body, SECRET))
    assert status == 200
    if expect.startswith("{"):
        assert json.loads(text) == json.loads(expect)
    else:
        assert expect in text


async def test_event_callback_over_http_runs_the_listener(slack: SlackEmulator) -> None:
    body = payloads.encode_json(payloads.app_mention("hi"))
    status, _ = await dispatch(make_app(slack), body, payloads.signed_request(body, SECRET))
    assert status == 200
    await slack.wait_for(lambda: bool(slack.calls_to("chat.postMessage")))


@pytest.mark.parametrize(
    ("secret", "age"),
    [("wrong-secret", 0), (SECRET, 301)],
    ids=["bad-signature", "stale-timestamp"],
)
async def test_bad_or_stale_signatures_are_refused(slack: SlackEmulator, secret: str, age: int) -> None:
    body = payloads.encode_form(payloads.slash_command("go"))
    headers = payloads.signed_request(body, secret, timestamp=int(time.time()) - age)
    status, _ = await dispatch(make_app(slack), body, headers)
    assert status == 401
    assert slack.calls == []


async def test_respond_reaches_the_emulated_response_url(slack: SlackEmulator) -> None:
    payload = payloads.block_actions("approve_once", "req-7", response_url=slack.response_url("click"))
    body = payloads.encode_interactive(payload)
    status, _ = await dispatch(make_app(slack), body, payloads.signed_request(body, SECRET))
    assert status == 200
    await slack.wait_for(lambda: bool(slack.responses["click"]))
    assert slack.responses["click"][0]["text"] == "Approved"


async def test_socket_mode_reconnects_after_disconnect(slack: SlackEmulator) -> None:
    handler = AsyncSocketModeHandler(make_app(slack), app_token="xapp-test")
    await handler.connect_async()
    try:
        await slack.socket_disconnect()
        await slack.wait_for(lambda: len(slack.calls_to("apps.connections.open")) == 2)
        ack = await slack.socket_send("slash_commands", payloads.slash_command("still there?"))
        assert ack == {"text": "on it: still there?"}
    finally:
        await handler.close_async()
