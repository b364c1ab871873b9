"""The Slack emulator itself: shapes, errors, limits, Block Kit and mention checks, Socket Mode."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.playground.emulator import ALL_SCOPES, Limits, SlackEmulator
from tests.fakes.slack_fixtures import slack_emulator  # noqa: F401 - the fixture under test

SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "hello"}}


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator(scopes=ALL_SCOPES) as emulator:
        yield emulator


@pytest.fixture
def client(slack: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=slack.api_url)


async def error_of(call: Any) -> tuple[int, str, dict[str, str]]:
    with pytest.raises(SlackApiError) as info:
        await call
    response = info.value.response
    return response.status_code, response["error"], dict(response.headers)


async def test_post_update_and_thread_shapes(slack: SlackEmulator, client: AsyncWebClient) -> None:
    root = await client.chat_postMessage(channel="C0001", text="status", blocks=[SECTION])
    assert root["channel"] == "C0001"
    assert root["message"]["ts"] == root["ts"]
    assert root["message"]["bot_id"] == slack.bot_id
    reply = await client.chat_postMessage(channel="C0001", text="reply", thread_ts=root["ts"])
    assert float(reply["ts"]) > float(root["ts"])
    updated = await client.chat_update(channel="C0001", ts=root["ts"], text="done")
    assert (updated["ts"], updated["text"]) == (root["ts"], "done")
    replies = await client.conversations_replies(channel="C0001", ts=root["ts"])
    assert [m["text"] for m in replies["messages"]] == ["done", "reply"]
    link = await client.chat_getPermalink(channel="C0001", message_ts=reply["ts"])
    assert link["permalink"].startswith("https://")
    assert (await client.chat_postEphemeral(channel="C0001", user="U0001", text="psst"))["message_ts"]
    assert (await client.reactions_add(channel="C0001", timestamp=root["ts"], name="eyes"))["ok"]
    assert (await client.chat_delete(channel="C0001", ts=reply["ts"]))["ok"]
    assert slack.thread("C0001", root["ts"])[0]["text"] == "done"
    assert [c.method for c in slack.calls][:3] == ["chat.postMessage", "chat.postMessage", "chat.update"]
    slack.assert_clean()


async def test_lookups_and_views(slack: SlackEmulator, client: AsyncWebClient) -> None:
    slack.usergroups["S0001"] = ["U0AAA", "U0BBB"]
    assert (await client.auth_test())["user_id"] == slack.bot_user_id
    assert (await client.usergroups_users_list(usergroup="S0001"))["users"] == ["U0AAA", "U0BBB"]
    assert (await client.users_info(user="U0AAA"))["user"]["id"] == "U0AAA"
    assert (await client.conversations_info(channel="C0001"))["channel"]["id"] == "C0001"
    modal = {"type": "modal", "title": {"type": "plain_text", "text": "Hi"}, "blocks": [SECTION]}
    opened = await client.views_open(trigger_id=slack.issue_trigger(), view=modal)
    assert opened["view"]["id"]
    updated = await client.views_update(view_id=opened["view"]["id"], view=modal)
    assert updated["view"]["id"] == opened["view"]["id"]
    home = await client.views_publish(user_id="U0AAA", view={"type": "home", "blocks": [SECTION]})
    assert home["ok"]
    assert slack.home_views["U0AAA"]["blocks"] == [SECTION]
    slack.assert_clean()


@pytest.mark.parametrize(
    ("method", "kwargs", "error"),
    [
        ("chat.update", {"channel": "C0001", "ts": "1.000001", "text": "x"}, "message_not_found"),
        ("chat.postMessage", {"channel": "nope", "text": "x"}, "channel_not_found"),
        ("chat.postMessage", {"channel": "C0001", "text": "x", "thread_ts": "9.9"}, "thread_not_found"),
        ("usergroups.users.list", {"usergroup": "S0NONE"}, "no_such_subteam"),
        (
            "views.update",
            {"view_id": "V0NONE", "view": {"type": "modal", "title": {"type": "plain_text", "text": "t"}}},
            "not_found",
        ),
        (
            "views.open",
            {"view": {"type": "modal", "title": {"type": "plain_text", "text": "t"}}},
            "invalid_trigger_id",
        ),
        ("no.such.method", {}, "unknown_method"),
    ],
)
async def test_slack_errors(client: AsyncWebClient, method: str, kwargs: dict[str, Any], error: str) -> None:
    status, code, _ = await error_of(client.api_call(method, json=kwargs))
    assert (status, code) == (200, error)


@pytest.mark.parametrize(("token", "error"), [("xoxb-wrong", "invalid_auth"), (None, "not_authed")])
async def test_bad_token_is_an_error_and_a_violation(
    slack: SlackEmulator, token: str | None, error: str
) -> None:
    client = AsyncWebClient(token=token, base_url=slack.api_url)
    _, code, _ = await error_of(client.auth_test())
    assert code == error
    assert slack.violations == [f"auth.test: {error} (token)"]


async def test_app_token_opens_the_socket_url(slack: SlackEmulator) -> None:
    client = AsyncWebClient(base_url=slack.api_url)
    opened = await client.apps_connections_open(app_token="xapp-test")
    assert opened["url"] == slack.socket_url


async def test_rate_limit_returns_429_with_retry_after_and_records_a_violation(slack: SlackEmulator) -> None:
    slack.limits.post_interval, slack.limits.post_burst = 60.0, 2
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    for _ in range(2):
        await client.chat_postMessage(channel="C0001", text="burst")
    await client.chat_postMessage(channel="C0002", text="other channel has its own pace")
    status, code, headers = await error_of(client.chat_postMessage(channel="C0001", text="too fast"))
    assert (status, code) == (429, "ratelimited")
    assert int(headers["Retry-After"]) >= 1
    assert len(slack.violations) == 1
    assert "chat.postMessage" in slack.violations[0]


async def test_tier_limit_is_per_method_in_a_sliding_window() -> None:
    limits = Limits(window=60.0)
    limits.tiers[3] = 3
    async with SlackEmulator(limits=limits, scopes=ALL_SCOPES) as slack:
        client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
        ts = (await client.chat_postMessage(channel="C0001", text="x"))["ts"]
        for i in range(3):
            await client.chat_update(channel="C0001", ts=ts, text=f"v{i}")
        status, _, _ = await error_of(client.chat_update(channel="C0001", ts=ts, text="v4"))
        await client.reactions_add(channel="C0001", timestamp=ts, name="eyes")  # another Tier 3 method
        assert status == 429
        assert [v.split(":")[0] for v in slack.violations] == ["rate limit"]


@pytest.mark.parametrize(
    ("blocks", "problem"),
    [
        ([SECTION] * 51, "51 > 50"),
        ([{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 2900}}] * 5, "msg_blocks_too_long"),
        ([{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}], "3001 > 3000"),
        ([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}], "151 > 150"),
        ([{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}], "must be plain_text"),
        ([{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}], "not in 1..10"),
        ([{"type": "sectionz"}], "unknown block type"),
        ([{"type": "section"}], "needs text or fields"),
        ([dict(SECTION, block_id="a"), dict(SECTION, block_id="a")], "duplicate 'a'"),
        (
            [
                {
                    "type": "input",
                    "label": {"type": "plain_text", "text": "l"},
                    "element": {"type": "plain_text_input"},
                }
            ],
            "only in modals",
        ),
    ],
)
async def test_invalid_blocks_are_rejected(
    slack: SlackEmulator, client: AsyncWebClient, blocks: list[Any], problem: str
) -> None:
    _, code, _ = await error_of(client.chat_postMessage(channel="C0001", text="t", blocks=blocks))
    assert code == "invalid_blocks"
    assert any(problem in v for v in slack.violations), slack.violations


def button(**overrides: Any) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": "Go"},
        "action_id": "go",
        "value": "1",
        **overrides,
    }


@pytest.mark.parametrize(
    ("elements", "problem"),
    [
        ([button(text={"type": "plain_text", "text": "b" * 76})], "76 > 75"),
        ([button(value="v" * 2001)], "value: > 2000"),
        ([button(action_id="a" * 256)], "1-255"),
        ([button(), button()], "duplicate 'go'"),
        ([button(style="green")], "style"),
        ([button(confirm={"title": {"type": "plain_text", "text": "t"}})], "confirm.text: missing"),
        ([button(action_id=f"b{i}") for i in range(26)], "not in 1..25"),
        ([{"type": "image", "image_url": "https://x", "alt_text": "x"}], "not allowed here"),
    ],
)
def test_element_rules(elements: list[Any], problem: str) -> None:
    from bot.playground.emulator import validate_blocks

    errors = validate_blocks([{"type": "actions", "elements": elements}])
    assert any(problem in e for e in errors), errors


def test_valid_message_passes_validation() -> None:
    from bot.playground.emulator import validate_blocks

    confirm = {
        "title": {"type": "plain_text", "text": "Sure?"},
        "text": {"type": "mrkdwn", "text": "Really"},
        "confirm": {"type": "plain_text", "text": "Yes"},
        "deny": {"type": "plain_text", "text": "No"},
    }
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "Title"}},
        SECTION,
        {"type": "divider"},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "ctx"}]},
        {"type": "actions", "elements": [button(confirm=confirm), button(action_id="b2", style="danger")]},
        {"type": "actions", "elements": [button()]},  # action ids are unique per block, as in Slack
    ]
    assert validate_blocks(blocks) == []


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("<!channel> deploy", True),
        ("<!here|here>", True),
        ("ping <!everyone>", True),
        ("team <!subteam^S123|@oncall>", True),
        ("hey @channel look", True),
        ("<@U0STRANGER> approve", True),
        ("<@U0APPROVER> please approve", False),
        ("&lt;!channel&gt; escaped", False),
        ("@\u2060here neutralised", False),
        ("mail me at ops@here.example", False),
        ("<!date^1700000000^{time}|12:00>", False),
    ],
)
async def test_mentions_are_flagged_unless_allowed(
    slack: SlackEmulator, client: AsyncWebClient, text: str, flagged: bool
) -> None:
    slack.allowed_mentions.add("U0APPROVER")
    context = {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}
    await client.chat_postMessage(channel="C0001", text="safe fallback", blocks=[context])
    await client.chat_postMessage(channel="C0001", text=text)
    assert len(slack.violations) == (2 if flagged else 0), slack.violations


async def test_long_text_and_missing_fallback_are_violations(
    slack: SlackEmulator, client: AsyncWebClient
) -> None:
    await client.chat_postMessage(channel="C0001", text="x" * 4001)
    assert "4001 chars" in slack.violations[-1]
    await client.api_call("chat.postMessage", json={"channel": "C0001", "blocks": [SECTION]})
    assert "missing top-level fallback" in slack.violations[-1]


async def test_wait_for_wakes_on_calls_and_times_out(slack: SlackEmulator, client: AsyncWebClient) -> None:
    waiter = asyncio.create_task(slack.wait_for(lambda: len(slack.calls_to("auth.test")) == 2))
    await client.auth_test()
    assert not waiter.done()
    await client.auth_test()
    await waiter
    with pytest.raises(TimeoutError):
        await slack.wait_for(lambda: False, timeout=0.05)


async def test_fixture_gives_a_running_clean_emulator(slack_emulator: SlackEmulator) -> None:  # noqa: F811
    client = AsyncWebClient(token="xoxb-test", base_url=slack_emulator.api_url)
    assert (await client.auth_test())["ok"]
    assert slack_emulator.violations == []
