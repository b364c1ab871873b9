"""Logs: run and request ids on every record, JSON lines, and no secret ever reaches the output."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.ops import RedactFilter, bind_request, bind_run, configure_logging
from bot.ops.logs import REDACTED, secrets_from_environment

BOT_TOKEN = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
APP_TOKEN = "xapp-1-A0123456789-1234567890123-abcdef0123456789"
API_KEY = "sk-proj-Zk3v9QpL2mN8rT5wX7yB1cD4fG6hJ0kL"
SIGNING_SECRET = "8f14e45fceea167a5a36dedd4bea2543"  # no shape: known only by its value


@pytest.fixture
def output(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    configure_logging("DEBUG", fmt="json", secrets=[BOT_TOKEN], stream=stream)
    yield stream
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


def records(stream: io.StringIO, logger: str = "massgen.test") -> list[dict[str, str]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [line for line in lines if line["logger"] == logger]


def test_secrets_in_messages_args_and_tracebacks_never_reach_the_output(output: io.StringIO) -> None:
    log = logging.getLogger("massgen.test")
    log.info("token %s and key %s", BOT_TOKEN, API_KEY)
    log.warning(f"signing secret {SIGNING_SECRET} and app token {APP_TOKEN}")  # noqa: G004 - in the message
    log.error("call failed: %r", {"headers": {"Authorization": f"Bearer {BOT_TOKEN}"}})
    try:
        raise RuntimeError(f"auth failed for {API_KEY}")
    except RuntimeError:
        log.exception("with traceback")
    text = output.getvalue()
    assert text.count(REDACTED) >= 6
    for secret in (BOT_TOKEN, APP_TOKEN, API_KEY, SIGNING_SECRET):
        assert secret not in text
        assert secret[8:24] not in text  # not even a piece of it
    assert "with traceback" in text
    assert "RuntimeError: auth failed for [redacted]" in text


def test_every_record_carries_the_run_and_request_ids_across_tasks(output: io.StringIO) -> None:
    log = logging.getLogger("massgen.test")

    async def handle() -> None:
        bind_request("Ev0123")
        bind_run("run-abc")

        async def agent() -> None:  # a task created afterwards inherits the ids
            log.info("agent turn")

        await asyncio.create_task(agent())

    log.info("before")
    asyncio.run(handle())
    lines = records(output)
    assert [(r["message"], r["run_id"], r["request_id"]) for r in lines] == [
        ("before", "-", "-"),
        ("agent turn", "run-abc", "Ev0123"),
    ]
    assert {"time", "level", "logger"} <= set(lines[0])


def test_text_format_names_the_ids_too() -> None:
    stream = io.StringIO()
    handler = configure_logging("INFO", fmt="text", stream=stream)
    try:
        token = bind_run("run-xyz")
        logging.getLogger("t").info("hello %s", BOT_TOKEN)
        bind_run(None)
        assert token is not None
    finally:
        logging.getLogger().removeHandler(handler)
    line = stream.getvalue()
    assert "[run=run-xyz req=-]: hello [redacted]" in line


def test_short_values_and_ordinary_words_are_left_alone() -> None:
    redact = RedactFilter(["abc", "a-real-secret-value"]).redact
    assert redact("abc a-real-secret-value sk-short") == f"abc {REDACTED} sk-short"


def test_secret_values_come_from_variables_named_like_secrets() -> None:
    env = {
        "OPENAI_API_KEY": API_KEY,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "HOME": "/root",
        "DB_PASSWORD": "",
    }
    assert sorted(secrets_from_environment(env)) == sorted([API_KEY, SIGNING_SECRET])


async def test_a_slash_command_and_its_run_log_with_the_request_and_run_ids(tmp_path: Path) -> None:
    from tests.bot.harness import bot_harness

    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    configure_logging("INFO", fmt="json", stream=stream)
    try:
        async with bot_harness(tmp_path) as bot:
            assert (await bot.command("write a haiku"))[0] == 200
            await bot.settle()
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
    lines = records(stream, "bot.runs.executor")
    started = next(r for r in lines if r["message"].startswith("run started"))
    ended = next(r for r in lines if r["message"].startswith("run ended"))
    assert started["run_id"].startswith("run-")
    assert started["request_id"].endswith(".trigger")  # the slash command's trigger id
    assert (ended["run_id"], ended["request_id"]) == (started["run_id"], started["request_id"])
    assert ended["message"] == "run ended: finished"
