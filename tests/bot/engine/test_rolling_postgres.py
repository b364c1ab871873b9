"""A rolling restart under full Slack load: the processes share the app's Slack budget, so no 429s.

Slack's limits are per app and workspace, whichever process calls. Each process used to keep the
whole budget, so two workers (the old one and its replacement, during a rolling restart) together
sent twice what Slack takes and met 429s. Now each keeps 1 / the live processes (counted from the
engine's heartbeats; a process that left stops counting at once, one that died after
`dead_after`), and a process that joins fills its buckets from empty.

Time is compressed: Slack's "minute" is 3 s at the emulator and for the bots
(`MASSGEN_SLACK_MINUTE`), and every run's status message is refreshed often enough that each worker
would use its whole budget.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from approvals.testing import scratch_postgres_database
from bot.playground.emulator import Limits, SlackEmulator
from tests.bot.engine.procs import BotProcess, bot_env, upgrade_schema
from tests.bot.engine.test_crash_sqlite import _final_posts, _status_posts
from tests.bot.harness import APPROVER, TOKEN, team_yaml
from tests.conftest import postgres_url
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

MINUTE = 3.0
RUNS = 16
TURN = 10.0  # each run lasts ~30 s: every phase below has runs in flight


def _slow(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=TURN)


def _rate_limited(slack: SlackEmulator) -> list[str]:
    return [v for v in slack.violations if v.startswith("rate limit")]


@dataclass
class Rolling:
    """What a rolling restart under full load showed at the emulator and in the new worker's log."""

    rate_limited: list[str]
    finals: Counter[str]  # final answers per run thread
    new_log: str
    logs: str


async def rolling_restart(database: str, cwd: Path) -> Rolling:
    """A front end and a worker at full Slack load; a second worker started, then the first stopped.

    Also `make bench` (bench_scale): the 429s it prints are this scenario's.
    """
    limits = Limits(window=MINUTE, post_interval=MINUTE / 60, post_burst=3, retry_after=1)
    async with (
        SlackEmulator(bot_token=TOKEN, allowed_mentions={"U0USER", APPROVER}, limits=limits) as slack,
        ProviderServer(_slow) as provider,
    ):
        team = cwd / "team-rolling.yaml"
        team.write_text(team_yaml(provider, agents=2))
        env = bot_env(
            slack.api_url,
            database,
            MASSGEN_SLACK_MINUTE=str(MINUTE),
            MASSGEN_HEARTBEAT_INTERVAL="0.3",
            MASSGEN_DEAD_AFTER="3",
            MASSGEN_WORKER_CONCURRENCY=str(RUNS),
            MASSGEN_SHUTDOWN_GRACE="1",
            MASSGEN_STATUS_REFRESH="0.2",  # every run's status is refreshed 5 times a second: full load
        )
        await upgrade_schema(env, cwd)

        def worker(name: str) -> BotProcess:
            return BotProcess(["worker", "--team", str(team)], {**env, "MASSGEN_EXECUTOR_ID": name}, cwd)

        front_args = ["serve", "--role", "frontend", "--team", str(team)]
        front = BotProcess(front_args, {**env, "MASSGEN_EXECUTOR_ID": "f1"}, cwd)
        old, new = worker("w1"), worker("w2")
        procs = [front, old, new]
        try:
            await front.start(within=60)
            await old.start(within=60)
            for i in range(RUNS):
                assert await front.command(f"task number {i}") == 200
            await slack.wait_for(lambda: len(_status_posts(slack)) >= RUNS, 30)
            updates = len(slack.calls_to("chat.update", ok=True))
            # The old worker alone, at its whole budget (a loaded machine takes longer to get there).
            await slack.wait_for(
                lambda: len(slack.calls_to("chat.update", ok=True)) - updates >= 20, 4 * MINUTE
            )
            await new.start(within=60)  # the rolling restart: the new one up, then the old one stopped
            await asyncio.sleep(2 * MINUTE)  # both live, both busy
            assert len(_final_posts(slack)) < RUNS, "the runs ended before the restart: nothing was tested"
            assert await old.stop() == 0, old.output()
            await slack.wait_for(lambda: len(_final_posts(slack)) >= RUNS, 120)
        finally:
            for proc in procs:
                if proc.proc is not None and proc.proc.returncode is None:
                    await proc.stop()
        return Rolling(
            rate_limited=_rate_limited(slack),
            finals=Counter(str(c.params.get("thread_ts")) for c in _final_posts(slack)),
            new_log=new.output(tail=0),
            logs="\n".join(p.output(tail=3000) for p in procs),
        )


@pytest.mark.postgres
async def test_a_rolling_restart_under_load_meets_no_429(tmp_path: Path) -> None:
    server = postgres_url()
    if server is None:
        pytest.skip("no PostgreSQL (DATABASE_URL_POSTGRES)")
    async with scratch_postgres_database(server) as database:
        seen = await rolling_restart(database, tmp_path)
    assert seen.rate_limited == [], (seen.rate_limited[:5], seen.logs)
    assert len(seen.finals) == RUNS, seen.finals
    assert set(seen.finals.values()) == {1}, seen.finals
    assert "this one keeps 1/3" in seen.new_log  # front end, old and new worker
