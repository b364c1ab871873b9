"""Two front ends and two workers as separate processes on one PostgreSQL; a worker is killed for good.

Slack requests go to either front end, which only enqueues runs; the workers execute them. One
worker is `kill -9`ed mid-run and never comes back: the other's janitor sees its heartbeat stop
and takes its runs over. Every run finishes, and every run's status message and final answer
were posted exactly once (counted at the Slack emulator). Each worker has its own disk (state
folder): a run taken over still has the file its agent wrote on the dead worker (the workspace
snapshot in PostgreSQL), and the run's final patch shows it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections import Counter
from pathlib import Path

import pytest

from approvals import make_engine
from approvals.testing import scratch_postgres_database
from bot.playground.emulator import SlackEmulator
from orchestrator import RunFinished, SqlRunStore
from orchestrator.tools.wsync import MARKER
from tests.bot.engine.procs import BotProcess, bot_env, upgrade_schema
from tests.bot.engine.test_crash_sqlite import _duplicated_posts, _final_posts, _status_posts
from tests.bot.harness import APPROVER, TOKEN, team_yaml
from tests.conftest import postgres_url
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

RUNS = 4
TURN = 0.5  # seconds per model reply: runs last a few seconds, so the kill lands mid-run


def _slow(request: ProviderRequest) -> Reply:
    """Each agent first writes a file into its workspace, then follows the protocol, slowly."""
    wrote = any(name == "write_file" for m in request.messages for name, _ in m.tool_calls)
    if "write_file" in request.tools and "new_answer" in request.tools and not wrote:
        content = f"{request.model} wrote this on its first worker\n"
        return Reply(
            tool_calls=[("write_file", {"path": f"by-{request.model}.txt", "content": content})], delay=TURN
        )
    return dataclasses.replace(protocol_agent(request), delay=TURN)


async def _stored_on(disk: Path, *, within: float) -> dict[str, list[str]]:
    """Runs of this worker whose two agents wrote their file and had it checkpointed: run -> contents.

    The snapshot marker in the run's folder is written after the checkpoint is stored, so a kill
    after this point must not lose the files (before it, the write's outcome is rightly "unknown").
    """
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found: dict[str, list[str]] = {}
        for run in (disk / "workspaces").glob("run-*"):
            marker = run / MARKER
            stored = json.loads(marker.read_text()) if marker.is_file() else {}
            files = [p for p in run.glob("*/by-*.txt") if stored.get(p.parent.name, 0) >= 1]
            if len(files) == 2:
                found[run.name] = [p.read_text().strip() for p in files]
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no run on {disk} had both agents' files stored within {within}s")


async def _patches(database: str) -> dict[str, str]:
    """Each finished run's final patch, from the run store."""
    engine = make_engine(database)
    try:
        store = SqlRunStore(engine)
        out: dict[str, str] = {}
        for run in await store.runs():
            finished = [e for e in await store.events(run.run_id) if isinstance(e, RunFinished)]
            out[run.run_id] = (finished[-1].patch or "") if finished else ""
        return out
    finally:
        await engine.dispose()


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
        repo = tmp_path / "repo"
        repo.mkdir()
        (repo / "README.md").write_text("# the source every run starts from\n")
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=2, extra=f"workspace: {{source: '{repo}'}}\n"))
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
        disks = [tmp_path / f"disk-w{i}" for i in (1, 2)]  # one machine each: nothing shared on disk
        workers = [
            BotProcess(
                ["worker", "--team", str(team)],
                {**env, "MASSGEN_EXECUTOR_ID": f"w{i}", "MASSGEN_STATE_DIR": str(disks[i - 1])},
                tmp_path,
            )
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
            left_behind = await _stored_on(disks[0], within=30)  # w1's run: both agents wrote a file
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
        taken = workers[1].output(tail=0)  # the whole log: the takeover comes long before its end
        assert "janitor: took over" in taken, taken  # w1's runs, by w2
        assert "took over 0 " not in taken
        assert slack.violations == []
        # The dead worker's files reached the answers of the runs w2 finished for it.
        patches = await _patches(database)
        for run_id, contents in left_behind.items():  # whichever agent won, its file was made on w1
            assert any(f"+{content}" in patches[run_id] for content in contents), (run_id, patches[run_id])
