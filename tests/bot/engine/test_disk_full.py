"""A full disk mid-run (SQLite): not ready while full, nothing lost, then every run (one started
while the disk was full too) finishes and posts its final answer once, also across a restart.

The disk fills for real as far as the bot can tell: the process's file-size limit (RLIMIT_FSIZE,
set from outside with prlimit) is lowered to what its files hold, so every write that grows the
database or its write-ahead log fails as on a full disk (SQLite: "database or disk is full"), and
raised again to free the space.
"""

from __future__ import annotations

import asyncio
import dataclasses
import resource
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bot.playground.emulator import SlackEmulator
from tests.bot.engine.procs import BotProcess, bot_env
from tests.bot.engine.test_crash_sqlite import _final_posts, _status_posts
from tests.bot.harness import APPROVER, TOKEN, team_yaml
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

USER = "U0USER"


def _slow(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=1.5)


def _fill(pid: int, folder: Path) -> None:
    """No file of the process may grow past what the largest one holds now: the disk is full."""
    largest = max(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (largest, resource.RLIM_INFINITY))


def _free(pid: int) -> None:
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


async def _ready(bot: BotProcess) -> int:
    async with aiohttp.ClientSession() as session, session.get(f"{bot.base}/readyz") as response:
        return response.status


async def _until_status(bot: BotProcess, status: int, within: float) -> None:
    async with asyncio.timeout(within):
        while await _ready(bot) != status:
            await asyncio.sleep(0.2)


@dataclass
class DiskFull:
    """What a full disk mid-run left (`full_disk`)."""

    finals: Counter[str]  # final answers posted, by run thread
    statuses: int  # status messages posted
    ready_after: float  # seconds from freeing the space until /readyz answered 200
    finished_after: float  # seconds from freeing the space until the last final answer
    output: str  # the first process's output, for a failure's message


async def full_disk(cwd: Path, *, full_for: float = 3.0) -> DiskFull:
    """Two runs (one started while full) on SQLite, the disk full for `full_for` s, then a restart."""
    data = cwd / "data"
    data.mkdir()
    async with (
        SlackEmulator(bot_token=TOKEN, allowed_mentions={USER, APPROVER}) as slack,
        ProviderServer(_slow) as provider,
    ):
        team = cwd / "team.yaml"
        team.write_text(team_yaml(provider, agents=2))
        env = bot_env(slack.api_url, f"sqlite:///{data / 'bot.db'}", MASSGEN_STATE_DIR=str(data / "state"))
        args = ["serve", "--team", str(team)]
        bot = await BotProcess(args, env, cwd).start()
        try:
            assert await bot.command("write release notes") == 200
            await slack.wait_for(lambda: bool(_status_posts(slack)) and bool(provider.requests), 30)
            assert bot.proc is not None
            _fill(bot.proc.pid, data)
            await _until_status(bot, 503, 20)  # the probe write fails: not ready
            # Taken (the engine's queue had room), then suspended at its first write: it waits.
            assert await bot.command("summarise the incident") == 200
            await asyncio.sleep(full_for)  # both runs meet the full disk
            assert not _final_posts(slack)
            _free(bot.proc.pid)
            freed = time.monotonic()
            await _until_status(bot, 200, 30)
            ready_after = time.monotonic() - freed
            try:
                await slack.wait_for(lambda: len(_final_posts(slack)) >= 2, 90)
            except TimeoutError:
                raise AssertionError(bot.output(tail=0)[-20000:]) from None
            finished_after = time.monotonic() - freed
        finally:
            if bot.proc is not None and bot.proc.returncode is None:
                _free(bot.proc.pid)
            assert await bot.stop(within=60) == 0, bot.output()
        again = await BotProcess(args, env, cwd).start()  # a restart repeats nothing
        try:
            await asyncio.sleep(5.0)
        finally:
            assert await again.stop(within=60) == 0, again.output()
    finals = Counter(str(c.params.get("thread_ts")) for c in _final_posts(slack))
    return DiskFull(finals, len(_status_posts(slack)), ready_after, finished_after, bot.output(tail=6000))


async def test_a_full_disk_mid_run_loses_nothing_and_posts_each_answer_once(tmp_path: Path) -> None:
    result = await full_disk(tmp_path)
    assert list(result.finals.values()) == [1, 1], (result.finals, result.output)
    assert result.statuses == 2  # one status message per run, none posted twice
