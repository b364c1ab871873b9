"""`massgen-bot health`: the container health check answers for HTTP and Socket Mode servers alike."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from bot.app import build_health_app
from bot.cli import main
from tests.bot.harness import bot_harness


async def health(*args: str) -> int:
    # The check blocks (urllib, like the HEALTHCHECK it is): off the loop that serves the answer.
    return await asyncio.to_thread(main, ["health", *args])


async def test_health_passes_on_both_servers_and_ready_fails_until_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with bot_harness(tmp_path) as bot:
        http_port = str(bot.http.port)
        server: Any = TestServer(build_health_app(bot.services))  # what Socket Mode serves on $PORT
        await server.start_server()
        try:
            socket_port = str(server.port)
            assert await health("--port", http_port) == 0
            assert await health("--port", socket_port) == 0
            assert await health("--ready", "--port", socket_port) == 0
            bot.services.ready_checks["engine"] = _not_ready
            assert await health("--ready", "--port", socket_port) == 1
            assert "HTTP 503" in capsys.readouterr().err
            assert await health("--port", socket_port) == 0  # alive all the same
        finally:
            await server.close()


async def _not_ready() -> str | None:
    return "engine not launched"


async def test_health_fails_in_one_line_when_nothing_listens(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("PORT", str(port))
    assert await health("--timeout", "2") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"massgen-bot: health: http://127.0.0.1:{port}/healthz: ")
    assert err.count("\n") == 1
