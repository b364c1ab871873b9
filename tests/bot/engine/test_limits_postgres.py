"""A provider's rate limit held by two worker processes together (PostgreSQL, separate processes).

The embedded process (`serve --role all`, also a worker) takes Slack's commands; it and a second
worker execute one run each at a time, three agents on the one limited provider, which would
burst past the limits at once. The provider server counts when each request arrived: no window
of the period holds more than the rate limit, no more calls than the concurrency limit were in
flight, and every run still finishes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from approvals.sql import async_database_url
from approvals.testing import scratch_postgres_database
from bot.playground.emulator import SlackEmulator
from tests.bot.engine.procs import BotProcess, bot_env, upgrade_schema
from tests.bot.engine.test_crash_sqlite import _final_posts
from tests.bot.engine.test_limits import most_in_a_window
from tests.bot.harness import APPROVER, TOKEN, team_yaml
from tests.conftest import postgres_url
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

RUNS = 2
LIMIT, PERIOD = 4, 1.0
IN_FLIGHT, TURN = 2, 0.2  # at most 2 calls at once, each taking TURN s at the provider


def _slow(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=TURN)


def _team(provider: ProviderServer) -> str:
    """Three agents, all on the limited provider: each round starts with 3 calls per run at once."""
    backend = f"{{type: openai, model: gpt-test, base_url: '{provider.openai_base_url}', api_key: k}}"
    text = team_yaml(provider, agents=1)
    agents = "".join(f"  - id: a{i}\n    backend: {backend}\n" for i in (1, 2, 3))
    _, _, rest = text.partition("orchestrator:")
    return "agents:\n" + agents + "orchestrator:" + rest


async def _executors(database: str) -> Counter[tuple[str, str]]:
    """(workflow name, executor) of every workflow the engine ran."""
    engine = create_async_engine(async_database_url(database))
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(text("SELECT name, executor_id FROM dbos.workflow_status"))
            return Counter((str(name), str(executor)) for name, executor in rows)
    finally:
        await engine.dispose()


async def _permit_holders(database: str) -> tuple[set[str], int]:
    """The executors that last claimed the rate permits, and how many slots are held now."""
    engine = create_async_engine(async_database_url(database))
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT kind, holder FROM provider_permits"))).all()
    finally:
        await engine.dispose()
    claimed = {str(holder).partition(":")[0] for kind, holder in rows if kind == "rate" and holder}
    return claimed, sum(1 for kind, holder in rows if kind == "slot" and holder)


@pytest.mark.postgres
async def test_two_workers_stay_under_one_providers_rate_limit_together(tmp_path: Path) -> None:
    server = postgres_url()
    if server is None:
        pytest.skip("no PostgreSQL (DATABASE_URL_POSTGRES)")
    async with (
        scratch_postgres_database(server) as database,
        SlackEmulator(bot_token=TOKEN, allowed_mentions={"U0USER", APPROVER}) as slack,
        ProviderServer(_slow) as provider,
    ):
        team = tmp_path / "team.yaml"
        team.write_text(_team(provider))
        limited = {
            "MASSGEN_WORKER_CONCURRENCY": "1",
            "MASSGEN_PROVIDER_LIMITS": f"openai={LIMIT}/{PERIOD}s, openai.concurrent={IN_FLIGHT}",
            "MASSGEN_PROVIDER_POLL": "0.02",
            "MASSGEN_SHUTDOWN_GRACE": "1",
        }
        env = bot_env(slack.api_url, database, **limited)
        await upgrade_schema(env, tmp_path)
        front = BotProcess(
            ["serve", "--role", "all", "--team", str(team)], {**env, "MASSGEN_EXECUTOR_ID": "w1"}, tmp_path
        )
        worker = BotProcess(["worker", "--team", str(team)], {**env, "MASSGEN_EXECUTOR_ID": "w2"}, tmp_path)
        procs = [front, worker]
        try:
            for proc in procs:
                await proc.start(within=60)
            for i in range(RUNS):
                assert await front.command(f"task number {i}") == 200
            await slack.wait_for(lambda: len(_final_posts(slack)) >= RUNS, 60)
        finally:
            for proc in procs:
                if proc.proc is not None and proc.proc.returncode is None:
                    await proc.stop()
        for proc in procs:
            assert proc.proc is not None
            assert proc.proc.returncode == 0, proc.output()
        times = [r.received_at for r in provider.requests if r.api == "responses"]
        assert len(times) > 2 * LIMIT  # enough calls that an unlimited fleet would burst past it
        assert most_in_a_window(times, PERIOD) <= LIMIT, sorted(times)
        # The third request after any one starts only once one of those two has ended, whichever
        # process holds their permits (a release is seen by the other at its next poll).
        ordered = sorted(times)
        gaps = [later - t for t, later in zip(ordered, ordered[IN_FLIGHT:], strict=False)]
        assert min(gaps) >= TURN * 0.95, gaps
        ran = await _executors(database)
        runs_by = {executor for (name, executor) in ran if name == "massgen.run"}
        assert runs_by == {"w1", "w2"}, ran  # both workers called the provider
        # The permits are leased rows, no workflow: claimed by the workers, none held now.
        assert {name for (name, _) in ran} == {"massgen.run"}, ran
        claimed, held = await _permit_holders(database)
        assert claimed
        assert claimed <= {"w1", "w2"}
        assert held == 0
        assert slack.violations == []
