"""Two front ends and two workers as separate processes on one PostgreSQL; a worker is killed for good.

Slack requests go to either front end, which only enqueues runs; the workers execute them. One
worker is `kill -9`ed mid-run and never comes back: the other's janitor sees its heartbeat stop
and takes its runs over. Every run finishes, and every run's status message and final answer
were posted exactly once (counted at the Slack emulator).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from approvals.testing import scratch_postgres_database
from tests.bot.engine.procs import BotProcess, bot_env, upgrade_schema
from tests.bot.engine.test_crash_sqlite import _duplicated_posts, _final_posts, _status_posts
from tests.bot.harness import APPROVER, TOKEN, team_yaml
from tests.conftest import postgres_url
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply
from tests.fakes.slack_emulator import SlackEmulator

RUNS = 4
TURN = 0.5  # seconds per model reply: runs last a few seconds, so the kill lands mid-run


def _slow(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=TURN)


@pytest.mark.postgres
async def test_a_worker_killed_for_good_has_its_runs_taken_over_and_every_run_finishes_once(
    tmp_path: Path,
) -> None:
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
        fast_janitor = {
            "MASSGEN_HEARTBEAT_INTERVAL": "0.3",
            "MASSGEN_DEAD_AFTER": "2",
            "MASSGEN_WORKER_CONCURRENCY": "1",
        }
        env = bot_env(slack.api_url, database, **fast_janitor)
        await upgrade_schema(env, tmp_path)  # PostgreSQL: the deploy migrates; processes only check
        fronts = [
            BotProcess(
                ["serve", "--role", "frontend", "--team", str(team)],
                {**env, "MASSGEN_EXECUTOR_ID": f"f{i}"},
                tmp_path,
            )
            for i in (1, 2)
        ]
        workers = [
            BotProcess(["worker", "--team", str(team)], {**env, "MASSGEN_EXECUTOR_ID": f"w{i}"}, tmp_path)
            for i in (1, 2)
        ]
        procs = [*fronts, *workers]
        try:
            for proc in procs:  # one at a time: each creates or checks the schema on start
                await proc.start(within=60)
            for i in range(RUNS):
                assert await fronts[i % 2].command(f"task number {i}") == 200
            # Both workers hold a run (one each at a time): the first status messages are out.
            await slack.wait_for(lambda: len(_status_posts(slack)) >= 2, 30)
            await workers[0].kill()
            await slack.wait_for(lambda: len(_final_posts(slack)) >= RUNS, 60)
        finally:
            for proc in procs:
                if proc.proc is not None and proc.proc.returncode is None:
                    await proc.stop()
        for proc in [*fronts, workers[1]]:
            assert proc.proc is not None
            assert proc.proc.returncode == 0, proc.output()
        finals = Counter(str(c.params.get("thread_ts")) for c in _final_posts(slack))
        assert len(finals) == RUNS, finals
        assert set(finals.values()) == {1}, finals
        assert len(_status_posts(slack)) == RUNS
        assert _duplicated_posts(slack) == []
        taken = workers[1].output()
        assert "janitor: took over" in taken, taken  # w1's runs, by w2
        assert "took over 0 " not in taken
        assert slack.violations == []
