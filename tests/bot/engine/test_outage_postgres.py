"""PostgreSQL stopped for longer than `dead_after` mid-run, then back: no worker is taken for dead.

A front end and two workers as separate processes on a PostgreSQL server of this test's own (it
is stopped and started again, so it cannot be the shared one), each worker holding runs when the
server stops. Every heartbeat fails meanwhile and every worker's last beat grows older than
`dead_after`. The old janitor then took the first live worker it judged after the restart for
dead, and its runs ran twice. Now: no takeover, every run finished (none left running), and
every run's final answer posted exactly once (counted at the Slack emulator).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from approvals import make_engine
from bot.playground.emulator import SlackEmulator
from orchestrator import SqlRunStore
from tests.bot.engine.procs import BotProcess, bot_env, free_port, upgrade_schema
from tests.bot.engine.test_crash_sqlite import _final_posts, _status_posts
from tests.bot.harness import APPROVER, TOKEN, team_yaml
from tests.conftest import postgres_url
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

RUNS = 4
TURN = 0.5  # seconds per model reply: runs last several seconds, so the outage lands mid-run
DEAD_AFTER = 3.0
OUTAGE = 2 * DEAD_AFTER + 1.0


def _slow(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=TURN)


def _bin_dir() -> Path | None:
    """The machine's PostgreSQL binaries (as `.ci/postgres.sh` finds them)."""
    found = shutil.which("initdb")
    if found is not None:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


@dataclass
class Cluster:
    """A throwaway PostgreSQL server this test may stop and start (`.ci/postgres.sh`'s settings)."""

    bin: Path
    data: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        as_pg = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        subprocess.run([*as_pg, *args], check=True, capture_output=True, timeout=60)

    def init(self) -> None:
        if os.getuid() == 0:
            shutil.chown(self.data, "postgres")
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync"
        )

    def start(self) -> None:
        options = f"-p {self.port} -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        pg_ctl = str(self.bin / "pg_ctl")
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.data / "log"), "-w", "-o", options, "start")

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")


@contextlib.contextmanager
def own_cluster() -> Iterator[Cluster]:
    binaries = _bin_dir()
    if binaries is None:
        pytest.skip("no PostgreSQL binaries (initdb) on this machine")
    data = Path(
        tempfile.mkdtemp(prefix="massgen-outage-pg-")
    )  # not under pytest's 0700 tmp: postgres reads it
    cluster = Cluster(binaries, data, free_port())
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.stop()
        shutil.rmtree(data, ignore_errors=True)


async def _states(database: str) -> Counter[str]:
    """How many runs the run store has in each state."""
    engine = make_engine(database)
    try:
        return Counter(run.status for run in await SqlRunStore(engine).runs())
    finally:
        await engine.dispose()


@contextlib.asynccontextmanager
async def _processes(procs: list[BotProcess]) -> AsyncIterator[None]:
    try:
        for proc in procs:  # one at a time: each checks the schema on start
            await proc.start(within=60)
        yield
    finally:
        for proc in procs:
            if proc.proc is not None and proc.proc.returncode is None:
                await proc.stop()


@dataclass
class Outage:
    """What a database outage mid-run left (`database_outage`)."""

    finals: Counter[str]  # final answers posted, by run thread
    states: Counter[str]  # runs by their state in the run store
    logs: dict[str, str]  # each worker's output, read while all were live
    exits: dict[str, int | None]  # each process's exit code
    outputs: dict[str, str]  # each process's whole output, for a failure's message
    finished_after: float  # seconds from the database's start until the last final answer


async def database_outage(cwd: Path, *, outage: float = OUTAGE) -> Outage:
    """RUNS runs across a front end and two workers; PostgreSQL stopped for `outage` s mid-run."""
    with own_cluster() as cluster:
        async with (
            SlackEmulator(bot_token=TOKEN, allowed_mentions={"U0USER", APPROVER}) as slack,
            ProviderServer(_slow) as provider,
        ):
            team = cwd / "team.yaml"
            team.write_text(team_yaml(provider, agents=2))
            fast_janitor = {
                "MASSGEN_HEARTBEAT_INTERVAL": "0.3",
                "MASSGEN_DEAD_AFTER": str(DEAD_AFTER),
                "MASSGEN_WORKER_CONCURRENCY": "2",
            }
            env = bot_env(slack.api_url, cluster.url, **fast_janitor)
            await upgrade_schema(env, cwd)
            front = BotProcess(
                ["serve", "--role", "frontend", "--team", str(team)],
                {**env, "MASSGEN_EXECUTOR_ID": "f1"},
                cwd,
            )
            workers = [
                BotProcess(
                    ["worker", "--team", str(team)],
                    {
                        **env,
                        "MASSGEN_EXECUTOR_ID": f"w{i}",
                        "MASSGEN_STATE_DIR": str(cwd / f"disk-w{i}"),
                    },
                    cwd,
                )
                for i in (1, 2)
            ]
            async with _processes([front, *workers]):
                for i in range(RUNS):
                    assert await front.command(f"task number {i}") == 200
                await slack.wait_for(lambda: len(_status_posts(slack)) >= RUNS, 30)
                assert len(_final_posts(slack)) < RUNS  # mid-run
                await asyncio.to_thread(cluster.stop)
                await asyncio.sleep(outage)  # every heartbeat fails; every last beat is older than dead_after
                await asyncio.to_thread(cluster.start)
                back = time.monotonic()
                await slack.wait_for(lambda: len(_final_posts(slack)) >= RUNS, 120)
                finished_after = time.monotonic() - back
                await asyncio.sleep(DEAD_AFTER + 1.0)  # a late takeover would show now
                states = await _states(cluster.url)
                # Read while all live: at the end a stopped worker leaves and the other rightly takes it over.
                logs = {f"w{i}": w.output(tail=0) for i, w in enumerate(workers, 1)}
            procs = {"f1": front, "w1": workers[0], "w2": workers[1]}
            exits = {name: None if p.proc is None else p.proc.returncode for name, p in procs.items()}
            outputs = {name: p.output() for name, p in procs.items()}
        finals = Counter(str(c.params.get("thread_ts")) for c in _final_posts(slack))
    return Outage(finals, states, logs, exits, outputs, finished_after)


@pytest.mark.postgres
async def test_a_database_outage_longer_than_dead_after_takes_no_live_worker_for_dead(tmp_path: Path) -> None:
    if postgres_url() is None:  # where the PostgreSQL tests run (the binaries are there too)
        pytest.skip("no PostgreSQL (DATABASE_URL_POSTGRES)")
    result = await database_outage(tmp_path)
    for name, code in result.exits.items():
        assert code == 0, result.outputs[name]
    for name, text in result.logs.items():
        assert "janitor: took over" not in text, (name, text[-6000:])
    assert len(result.finals) == RUNS, result.finals
    assert set(result.finals.values()) == {1}, (result.finals, {n: t[-8000:] for n, t in result.logs.items()})
    assert result.states == Counter({"finished": RUNS}), result.states
