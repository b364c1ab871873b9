"""The HTTP surface: signature checks, url_verification, health, and what `/massgen` answers before work."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bot.playground.payloads import (
    encode_form,
    encode_json,
    signed_request,
    slash_command,
    url_verification,
)
from bot.playground.signing import sign
from bot.slack.parse import MAX_TASK_CHARS
from tests.bot.harness import SECRET, bot_harness


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="unsigned"),
        pytest.param({"X-Slack-Signature": "v0=" + "0" * 64}, id="forged"),
        pytest.param("wrong-secret", id="other-secret"),
        pytest.param("stale", id="stale-timestamp"),
    ],
)
async def test_unverified_requests_get_401_and_change_nothing(tmp_path: Path, headers: object) -> None:
    async with bot_harness(tmp_path) as bot:
        body = encode_form(slash_command("deploy everything"))
        if headers == "wrong-secret":
            sent = {"Content-Type": "application/x-www-form-urlencoded", **sign(body, "not-the-secret")}
        elif headers == "stale":
            sent = signed_request(body, SECRET, timestamp=int(time.time()) - 301)
        else:
            assert isinstance(headers, dict)
            sent = {
                "Content-Type": "application/x-www-form-urlencoded",
                "X-Slack-Request-Timestamp": str(int(time.time())),
                **headers,
            }
        status, _ = await bot.post(body, headers=sent)
        assert status == 401
        await bot.settle()
        assert bot.slack.calls_to("chat.postMessage") == []
        assert await bot.services.runs.history.recent() == []


async def test_url_verification_and_health(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        status, text = await bot.post(encode_json(url_verification("abc123")))
        assert (status, json.loads(text)) == (200, {"challenge": "abc123"})
        health = await bot.http.get("/healthz")
        assert health.status == 200
        assert (await health.json())["ok"] is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "/massgen"),
        ("help", "/massgen"),
        ("x" * (MAX_TASK_CHARS + 1), "limit is 12,000"),
        ("--policy yolo do it", "must be one of"),
        ("cancel", "cancel RUN"),
    ],
)
async def test_help_and_usage_errors_are_ephemeral_and_start_nothing(
    tmp_path: Path, text: str, expected: str
) -> None:
    async with bot_harness(tmp_path) as bot:
        status, body = await bot.command(text)
        assert status == 200
        assert expected in body
        await bot.settle()
        assert bot.slack.calls_to("chat.postMessage") == []
        assert bot.services.runs.supervisor.started == 0


async def test_unknown_team_or_agent_is_an_ephemeral_error(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        for text, fragment in [
            ("--team nope fix it", "No team named `nope`"),
            ("--agents zz fix it", "Unknown agent `zz`"),
        ]:
            status, body = await bot.command(text)
            assert (status, body) == (200, "")
            await bot.settle()
            assert any(fragment in t for t in bot.ephemerals("U0USER"))
        assert bot.slack.calls_to("chat.postMessage") == []


async def test_a_named_team_whose_model_file_is_missing_is_refused_before_a_run(tmp_path: Path) -> None:
    teams = tmp_path / "teams"
    teams.mkdir()
    missing = tmp_path / "gone.gguf"
    (teams / "tiny.yaml").write_text(
        f"agents:\n  - {{id: a, backend: {{type: local, model_path: '{missing}'}}}}\n"
    )
    async with bot_harness(tmp_path) as bot:
        assert set(bot.services.runs.teams.problems()) == {"tiny"}  # said at start-up too
        status, body = await bot.command("--team tiny fix it")
        assert (status, body) == (200, "")
        await bot.settle()
        [said] = [t for t in bot.ephemerals("U0USER") if "tiny" in t]
        assert "cannot run here: agent `a`" in said
        assert "gone.gguf" in said
        assert bot.slack.calls_to("chat.postMessage") == []
        assert bot.services.runs.supervisor.started == 0


async def test_slash_command_acks_fast(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        elapsed = []
        for _ in range(20):
            started = time.perf_counter()
            status, _ = await bot.command("status")
            elapsed.append(time.perf_counter() - started)
            assert status == 200
        await bot.settle()
        elapsed.sort()
        # Slack's budget is 3 s; ours is 100 ms at p99 (the bench measures it under load).
        assert elapsed[-2] < 0.1, elapsed


MALFORMED = [
    pytest.param(b"payload=%7Bnot-json", id="payload-not-json"),
    pytest.param(b"payload=%5B1%2C2%5D", id="payload-a-list"),
    pytest.param(b'{"type": "event_callback", "event": 5}', id="event-not-an-object"),
    pytest.param(b"\xff\xfe\x00garbage", id="not-utf8"),
    pytest.param(
        b'{"type": "event_callback", "event": {"type": "app_mention", "user": 5, "text": 7}}',
        id="mention-fields-of-the-wrong-type",
    ),
    pytest.param(
        b"payload=%7B%22type%22%3A%22block_actions%22%2C%22user%22%3A5%2C%22actions%22%3A3%7D",
        id="click-fields-of-the-wrong-type",
    ),
]


@pytest.mark.parametrize("body", MALFORMED)
async def test_a_malformed_signed_body_gets_400_and_one_log_line(
    tmp_path: Path, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    async with bot_harness(tmp_path) as bot:
        status, text = await bot.post(body)
        assert (status, json.loads(text)) == (400, {"error": "malformed request body"})
        refused = [r for r in caplog.records if "malformed Slack request refused" in r.getMessage()]
        assert len(refused) == 1
        assert refused[0].exc_info is None, "one line, no traceback"
        assert await bot.services.runs.history.recent() == []
