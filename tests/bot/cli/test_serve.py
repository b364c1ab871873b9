"""`massgen-bot serve` as a process, driven exactly as Slack would; `start` guidance on a fresh machine."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp

from bot.playground.emulator import Fault, SlackEmulator
from bot.playground.payloads import encode_form, signed_request, slash_command
from tests.bot.harness import SECRET, TOKEN, team_yaml
from tests.fakes.provider_server import ProviderServer

CLI = [sys.executable, "-m", "bot"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "OPENAI_", "ANTHROPIC_", "DATABASE_"))
    }
    return {**keep, **extra}


async def _wait_healthy(url: str, proc: asyncio.subprocess.Process, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            assert proc.returncode is None, "serve exited early"
            try:
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("serve never became healthy")


async def _wait_serving(base: str, proc: asyncio.subprocess.Process, within: float = 20.0) -> None:
    """Until start-up is done: `/readyz` answers 503 "starting: …" before, and `/healthz` 200 all along."""
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            assert proc.returncode is None, "serve exited early"
            with contextlib.suppress(aiohttp.ClientConnectionError):
                async with session.get(f"{base}/readyz") as response:
                    if "starting" not in await response.json():
                        return
                async with session.get(f"{base}/healthz") as response:
                    assert response.status == 200  # alive while it starts
            await asyncio.sleep(0.1)
    raise AssertionError("serve never finished starting")


async def test_serve_runs_a_task_end_to_end_and_drains_on_sigterm(tmp_path: Path) -> None:
    async with (
        SlackEmulator(bot_token=TOKEN, allowed_mentions={"U0USER"}) as slack,
        ProviderServer() as provider,
    ):
        slack.inject("auth.test", Fault(error="unknown_method", status=200, retry_after=None, times=5))
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=2))  # real Slack pacing: ~1 post/s
        port = _free_port()
        env = _env(
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=slack.api_url,
            DATABASE_URL=f"sqlite:///{tmp_path / 'bot.db'}",
            OPENAI_BASE_URL=provider.openai_base_url,
            OPENAI_API_KEY="k",
            ANTHROPIC_BASE_URL=provider.anthropic_base_url,
            ANTHROPIC_API_KEY="k",
        )
        proc = await asyncio.create_subprocess_exec(
            *CLI,
            "serve",
            "--port",
            str(port),
            "--team",
            str(team),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            await _wait_serving(base, proc)
            async with aiohttp.ClientSession() as session, session.get(f"{base}/readyz") as r:
                # auth.test failed at start-up (the injected faults): alive, but not ready, and why.
                report = await r.json()
                assert (r.status, report["ready"], report["database"]) == (503, False, "ok")
                assert report["slack_auth"].startswith("failed")
            body = encode_form(slash_command("write release notes"))
            async with aiohttp.ClientSession() as session:
                async with session.post(
                    f"{base}/slack/events", data=body, headers=signed_request(body, SECRET)
                ) as r:
                    assert r.status == 200
                async with session.post(
                    f"{base}/slack/events",
                    data=body,
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                ) as r:
                    assert r.status == 401

            def finished() -> bool:
                return any(
                    "Final answer" in str(c.params.get("blocks"))
                    or "final answer" in str(c.params.get("text")).lower()
                    for c in slack.calls_to("chat.postMessage", ok=True)
                )

            await slack.wait_for(finished, 30)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 0, stderr.decode()[-2000:]
        assert slack.violations == []


async def test_serve_without_slack_settings_explains_what_is_missing(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        "serve",
        cwd=tmp_path,
        env=_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    text = stderr.decode()
    assert proc.returncode == 1
    for needle in (
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "connections:write",
        "massgen-bot run",
        "playground",
    ):
        assert needle in text


async def test_start_without_slack_settings_serves_the_playground(tmp_path: Path) -> None:
    async with ProviderServer() as provider:
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=2))
        port = _free_port()
        env = _env(MASSGEN_PLAYGROUND_PORT=str(port), MASSGEN_STATE_DIR=str(tmp_path / "state"))
        proc = await asyncio.create_subprocess_exec(
            *CLI,
            "start",
            "--team",
            str(team),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await _wait_healthy(f"http://127.0.0.1:{port}/", proc, within=60)
            async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/") as r:
                assert "massgen" in await r.text()
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(proc.communicate(), 30)
        log = stderr.decode()
        assert proc.returncode == 0, log[-2000:]
        assert "mode: playground" in log
        assert f"open http://127.0.0.1:{port}" in log


async def test_socket_without_app_token_names_it(tmp_path: Path) -> None:
    env = _env(SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s")
    proc = await asyncio.create_subprocess_exec(
        *CLI, "socket", cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert "SLACK_APP_TOKEN" in stderr.decode()
