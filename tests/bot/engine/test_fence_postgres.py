"""A worker taken for dead while it still drives its runs: the run store's seq fence keeps one driver.

The janitor's rules make this rare (a worker is taken over only after `dead_after` of database
uptime without a beat), so it is forced here: w1 beats only once, at launch (its heartbeat
interval is longer than the test) and never fences itself (its own `dead_after` is long), while
w2 judges with a `dead_after` of one second. w2 takes w1's runs over while w1 is mid-run, and for
a while both drive each of them. The seq a run's writes name is its lease generation: the first
of the two to write a seq wins, the other stops at once (`RunFenced`, then `FENCED`: its step
never returns). So each run has one end in the run store, its seqs run 1..n with no gap or
overwrite, and its final answer is posted exactly once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from approvals import make_engine
from approvals.testing import scratch_postgres_database
from bot.playground.emulator import SlackEmulator
from orchestrator import SqlRunStore
from orchestrator.events import TERMINAL_KINDS
from tests.bot.engine.procs import BotProcess, bot_env, upgrade_schema
from tests.bot.engine.test_crash_sqlite import _final_posts, _status_posts
from tests.bot.engine.test_outage_postgres import _processes
from tests.bot.harness import APPROVER, TOKEN, team_yaml
from tests.conftest import postgres_url
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

RUNS = 3
TURN = 5.0  # seconds per model reply: every run is still mid-run when w2 takes over


def _slow(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=TURN)


async def _ends(database: str) -> dict[str, tuple[list[int], list[str]]]:
    """Each run's stored seqs and the kinds of its terminal events."""
    engine = make_engine(database)
    try:
        store = SqlRunStore(engine)
        out: dict[str, tuple[list[int], list[str]]] = {}
        for run in await store.runs():
            events = await store.events(run.run_id)
            out[run.run_id] = ([e.seq for e in events], [e.kind for e in events if e.kind in TERMINAL_KINDS])
        return out
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_a_live_worker_taken_over_is_fenced_and_each_run_ends_once(tmp_path: Path) -> None:
    server = postgres_url()
    if server is None:
        pytest.skip("no PostgreSQL (DATABASE_URL_POSTGRES)")
    async with (
        scratch_postgres_database(server) as database,
        SlackEmulator(bot_token=TOKEN, allowed_mentions={"U0USER", APPROVER}) as slack,
        ProviderServer(_slow) as provider,
    ):
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=2))
        env = bot_env(slack.api_url, database, MASSGEN_WORKER_CONCURRENCY=str(RUNS))
        await upgrade_schema(env, tmp_path)
        front = BotProcess(
            ["serve", "--role", "frontend", "--team", str(team)],
            {**env, "MASSGEN_EXECUTOR_ID": "f1"},
            tmp_path,
        )

        def worker(name: str, interval: str, dead_after: str) -> BotProcess:
            own = {
                "MASSGEN_EXECUTOR_ID": name,
                "MASSGEN_STATE_DIR": str(tmp_path / f"disk-{name}"),
                "MASSGEN_HEARTBEAT_INTERVAL": interval,
                "MASSGEN_DEAD_AFTER": dead_after,
            }
            return BotProcess(["worker", "--team", str(team)], {**env, **own}, tmp_path)

        w1, w2 = worker("w1", "3600", "3600"), worker("w2", "0.2", "1")
        async with _processes([front, w1]):
            for i in range(RUNS):
                assert await front.command(f"task number {i}") == 200
            await slack.wait_for(lambda: len(_status_posts(slack)) >= RUNS, 30)  # all on w1
            assert len(_final_posts(slack)) == 0
            async with _processes([w2]):
                await slack.wait_for(lambda: "janitor: took over" in w2.output(tail=0), 30)
                await slack.wait_for(lambda: len(_final_posts(slack)) >= RUNS, 90)
                await asyncio.sleep(2.0)  # a second final answer would show now
        ends = await _ends(database)
    finals = Counter(str(c.params.get("thread_ts")) for c in _final_posts(slack))
    assert len(finals) == RUNS, finals
    assert set(finals.values()) == {1}, finals
    assert len(ends) == RUNS
    for run_id, (seqs, terminal) in ends.items():
        assert seqs == list(range(1, len(seqs) + 1)), run_id
        assert terminal == ["finished"], (run_id, terminal)
    assert f"took over {RUNS} run(s) of w1" in w2.output(tail=0)
    both = w1.output(tail=0) + w2.output(tail=0)
    assert "stored by another driver" in both, both[-6000:]  # they met: one was fenced
