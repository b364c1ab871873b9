"""The real bot as separate processes (`python -m bot ...`): `kill -9` is real; tests drive them over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bot.playground.payloads import encode_form, signed_request, slash_command
from tests.bot.harness import SECRET, TOKEN

CLI = [sys.executable, "-m", "bot"]


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bot_env(slack_url: str, database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a bot process under test (no real provider or Slack settings leak in)."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "OPENAI_", "ANTHROPIC_", "DATABASE_", "MASSGEN_"))
    }
    return {
        **keep,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack_url,
        "DATABASE_URL": database_url,
        "MASSGEN_ENGINE_POLL": "0.05",
        "MASSGEN_STATUS_REFRESH": "600",
        **extra,
    }


async def upgrade_schema(env: dict[str, str], cwd: Path) -> None:
    """`massgen-bot db upgrade`, as a deploy runs it once before its front ends and workers start."""
    process = await asyncio.create_subprocess_exec(
        *CLI, "db", "upgrade", env=env, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    assert process.returncode == 0, out.decode(errors="replace")


@dataclass
class BotProcess:
    """One `massgen-bot` process."""

    args: list[str]
    env: dict[str, str]
    cwd: Path
    port: int = field(default_factory=free_port)
    proc: asyncio.subprocess.Process | None = None
    log: Path | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, *, within: float = 30.0, ready: bool = True) -> BotProcess:
        """Start it and wait until it serves, and (`ready`) until its `/readyz` says ready.

        Its port answers from the process's first second (`/readyz` 503 "starting: …"), so only
        readiness says it takes Slack's requests and runs. `ready=False`: it serves, ready or not
        (a test that starts it unready on purpose).
        """
        self.log = self.cwd / f"bot-{self.port}-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *CLI,
                *self.args,
                cwd=self.cwd,
                env={**self.env, "PORT": str(self.port)},
                stdout=out,
                stderr=out,
            )
        deadline = time.monotonic() + within
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if self.proc.returncode is not None:
                    raise AssertionError(f"bot exited early:\n{self.output()}")
                with contextlib.suppress(aiohttp.ClientConnectionError):
                    async with session.get(f"{self.base}/readyz") as response:
                        report = await response.json()
                        if response.status == 200 or (not ready and "starting" not in report):
                            return self
                await asyncio.sleep(0.05)
        raise AssertionError(f"bot never became {'ready' if ready else 'serving'}:\n{self.output()}")

    def output(self, *, tail: int = 4000) -> str:
        """What it logged (the last `tail` characters; 0: all)."""
        text = "" if self.log is None or not self.log.exists() else self.log.read_text(errors="replace")
        return text[-tail:] if tail else text

    async def command(self, text: str) -> int:
        """A signed `/massgen` slash command."""
        body = encode_form(slash_command(text))
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{self.base}/slack/events", data=body, headers=signed_request(body, SECRET)) as r,
        ):
            return r.status

    async def post(self, body: bytes, headers: dict[str, str]) -> int:
        """Any signed Slack request (a click)."""
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{self.base}/slack/events", data=body, headers=headers) as r,
        ):
            return r.status

    async def kill(self) -> None:
        """`kill -9`."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()

    async def stop(self, *, within: float = 30.0) -> int:
        """SIGTERM, then its exit code."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), within)
