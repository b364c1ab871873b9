"""Scale-out on DBOS: runs per minute with 1, 2 and 4 worker processes, and recovery after `kill -9`.

A throwaway PostgreSQL on loopback (`.ci/postgres.sh`, its own directory and port) holds the bot's
tables and DBOS's. Workers are real `massgen-bot worker` processes against the Slack emulator and
the loopback provider, whose scripted agents answer after a fixed latency. Runs are enqueued the
way a front end does (DBOS's client on the `runs` queue, workflow id = run id); a run counts when
the run store says it finished.

Rolling restart: `tests/bot/engine/test_rolling_postgres.py`'s scenario (Slack's minute compressed
to 3 s at the emulator and in the bots): the 429s the emulator answered and any final answer
posted twice.

Database outage: `tests/bot/engine/test_outage_postgres.py`'s scenario with PostgreSQL (a server
of its own) stopped for DB_OUTAGE seconds mid-run: how long after it is back every final answer is
posted, and any lost, posted twice or run by a worker taken for dead. Disk full:
`tests/bot/engine/test_disk_full.py`'s scenario with the disk full for DISK_FULL seconds. Slack
outage: `tests/bot/engine/test_slack_outage.py`'s, every Web API call failing for SLACK_OUTAGE s.

Recovery: one worker holding RECOVERY_RUNS runs in flight is killed with SIGKILL and started
again under the same executor id; the figures, from the new process's start, are the time until
it is ready (`/readyz`), until every run was resumed (its step logged it) and until every run
finished, and how many were lost.

The workers start as the image starts them: with the project's bytecode compiled (the Dockerfile's
UV_COMPILE_BYTECODE). A checkout run with PYTHONDONTWRITEBYTECODE (as here) would otherwise
compile every module of the bot again in each worker at every start, about a second of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import secrets
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from approvals.testing import scratch_postgres_database
from bot.engine import RUNS_QUEUE, package_version, system_database_url
from bot.playground.emulator import SlackEmulator
from bot.settings import BotSettings
from tests.bot.engine.procs import BotProcess, bot_env, upgrade_schema
from tests.bot.engine.test_disk_full import full_disk
from tests.bot.engine.test_outage_postgres import RUNS as OUTAGE_RUNS
from tests.bot.engine.test_outage_postgres import database_outage
from tests.bot.engine.test_rolling_postgres import rolling_restart
from tests.bot.engine.test_slack_outage import RUNS as SLACK_RUNS
from tests.bot.engine.test_slack_outage import slack_outage
from tests.bot.harness import TOKEN, team_yaml
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

LATENCY = 0.25  # seconds per model reply
CONCURRENCY = 4  # runs per worker at a time
RUNS_PER_WORKER = 12
WORKERS = (1, 2, 4)
RECOVERY_RUNS = 100
PG_PORT = "55473"
DB_OUTAGE = 20.0  # seconds PostgreSQL is stopped mid-run (issue 17's scenario)
DISK_FULL = 20.0  # seconds the disk stays full mid-run
SLACK_OUTAGE = 20.0  # seconds every Slack Web API call answers 503
_RESTARTED = re.compile(r"run (run-\S+) (?:resumed|started)")


def _fixed_latency(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=LATENCY)


def _slower(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=LATENCY * 4)


def _payload(task: str, channel: str) -> dict[str, Any]:
    return {
        "team": None,
        "agents": [],
        "policy": None,
        "task": task,
        "requester": "U0USER",
        "channel": channel,
        "thread_ts": None,
        "context": None,
        "response_url": None,
    }


def _enqueue(sysdb: str, runs: Iterable[tuple[str, dict[str, Any]]]) -> None:
    from dbos import DBOSClient, EnqueueOptions

    client = DBOSClient(system_database_url=sysdb, application_name="massgen")
    try:
        for run_id, payload in runs:
            options: EnqueueOptions = {
                "workflow_name": "massgen.run",
                "queue_name": RUNS_QUEUE,
                "workflow_id": run_id,
                "app_version": package_version(),
            }
            client.enqueue(options, run_id, payload)
    finally:
        client.destroy()


async def _finished(database: str, run_ids: list[str]) -> int:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(database)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(text("SELECT run_id, status FROM runs"))
            done = {r.run_id for r in rows if r.status in {"finished", "failed", "cancelled"}}
    finally:
        await engine.dispose()
    return len(done & set(run_ids))


async def _wait_finished(database: str, run_ids: list[str], within: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within:
        if await _finished(database, run_ids) == len(run_ids):
            return time.monotonic() - started
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{await _finished(database, run_ids)}/{len(run_ids)} runs finished in {within} s")


async def _workers(n: int, env: dict[str, str], team: Path, cwd: Path, concurrency: int) -> list[BotProcess]:
    procs = [
        BotProcess(
            ["worker", "--team", str(team)],
            {**env, "MASSGEN_EXECUTOR_ID": f"w{i}", "MASSGEN_WORKER_CONCURRENCY": str(concurrency)},
            cwd,
        )
        for i in range(n)
    ]
    for proc in procs:
        await proc.start(within=90)
    return procs


async def _throughput(server: str, cwd: Path, workers: int) -> float:
    async with (
        scratch_postgres_database(server) as database,
        SlackEmulator(bot_token=TOKEN) as slack,
        ProviderServer(_fixed_latency) as provider,
    ):
        team = cwd / f"team-{workers}.yaml"
        team.write_text(team_yaml(provider, agents=2))
        env = bot_env(slack.api_url, database)
        await upgrade_schema(env, cwd)
        procs: list[BotProcess] = []
        try:
            procs = await _workers(workers, env, team, cwd, CONCURRENCY)
            sysdb = system_database_url(BotSettings.with_values(DATABASE_URL=database))
            runs = [
                (f"run-{secrets.token_hex(6)}", _payload(f"task {i}", f"C{i % 10:04d}"))
                for i in range(RUNS_PER_WORKER * workers)
            ]
            started = time.monotonic()
            await asyncio.to_thread(_enqueue, sysdb, runs)
            await _wait_finished(database, [r for r, _ in runs], within=300)
            return len(runs) / (time.monotonic() - started) * 60
        finally:
            for proc in procs:
                if proc.proc is not None and proc.proc.returncode is None:
                    await proc.stop()


async def _recovery(server: str, cwd: Path) -> Recovery:
    async with (
        scratch_postgres_database(server) as database,
        SlackEmulator(bot_token=TOKEN) as slack,
        ProviderServer(_slower) as provider,
    ):
        team = cwd / "team-recovery.yaml"
        team.write_text(team_yaml(provider, agents=2))
        env = bot_env(slack.api_url, database)
        await upgrade_schema(env, cwd)
        [worker] = await _workers(1, env, team, cwd, RECOVERY_RUNS)
        try:
            sysdb = system_database_url(BotSettings.with_values(DATABASE_URL=database))
            runs = [
                (f"run-{i:03d}-{secrets.token_hex(3)}", _payload(f"recover {i}", f"C{i % 10:04d}"))
                for i in range(RECOVERY_RUNS)
            ]
            ids = [r for r, _ in runs]
            await asyncio.to_thread(_enqueue, sysdb, runs)
            # Every run has sent its first model calls (both agents answer at once): all are in flight.
            await _until(lambda: len(provider.requests) >= RECOVERY_RUNS * 2, 120)
            await worker.kill()
            in_flight = RECOVERY_RUNS - await _finished(database, ids)
            before, restarted = worker.log, time.monotonic()
            ready = asyncio.ensure_future(_timed(worker.start(within=90), restarted))
            # Each run's step logs "run <id> resumed" once it has rebuilt the run from the store
            # ("started": one still queued at the kill); timed from the process's start, as ready is.
            await _until(lambda: worker.log != before, 30)  # the new process's log
            await _until(lambda: len(set(_RESTARTED.findall(worker.output(tail=0)))) >= in_flight, 180)
            resumed = time.monotonic() - restarted
            up = await ready
            await _wait_finished(database, ids, within=300)
            finished = time.monotonic() - restarted
            left = RECOVERY_RUNS - await _finished(database, ids)
        finally:
            await worker.kill()
        return Recovery(in_flight, up, resumed, finished, left)


@dataclasses.dataclass(frozen=True, slots=True)
class Recovery:
    """A kill -9 and restart, timed from the new process's start (seconds)."""

    in_flight: int
    ready: float  # its /readyz said ready
    resumed: float  # the last run was resumed
    finished: float  # the last run finished
    lost: int


async def _timed(step: Awaitable[object], since: float) -> float:
    await step
    return time.monotonic() - since


async def _until(predicate: Callable[[], bool], within: float) -> None:
    """Poll `predicate` (the provider and the logs have no event to wait on) until true or `within` s."""
    deadline = time.monotonic() + within
    while not predicate():  # nothing to wait on: the state lives in other processes
        if time.monotonic() > deadline:
            raise TimeoutError("the bench's condition never held")
        await asyncio.sleep(0.05)


def _compile_bytecode() -> None:
    """The project's bytecode in its `__pycache__` folders (stale files are recompiled; nothing else)."""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for package in ("approvals", "orchestrator", "bot"):
        compileall.compile_dir(root / package, quiet=1, workers=0)


def _postgres(action: str, folder: Path) -> str:
    script = Path(__file__).resolve().parents[1] / ".ci" / "postgres.sh"
    env = {**os.environ, "PG_DIR": str(folder), "PG_PORT": PG_PORT}
    command = ["bash", str(script), action]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip()


async def _main() -> None:
    _compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as scratch:
        cwd = Path(scratch)
        pg = Path(tempfile.mkdtemp(prefix="bench-scale-pg-"))
        server = _postgres("start", pg)
        try:
            rates = {n: await _throughput(server, cwd, n) for n in WORKERS}
            cores = os.cpu_count() or 1
            for n, rate in rates.items():
                speedup, per_core = rate / rates[1], rate / min(n, cores)
                print(
                    f"   {n} worker(s) x {CONCURRENCY}: {rate:7.1f} runs/min  speed-up {speedup:.2f}x  "
                    f"per core {per_core:.1f} runs/min"
                )
            print(f"   ({cores} cores here; model latency {LATENCY} s per reply, 2 agents per run)")
            r = await _recovery(server, cwd)
            print(
                f"   kill -9 with {r.in_flight} runs in flight, then a restart: ready after {r.ready:.1f} s, "
                f"all resumed after {r.resumed:.1f} s (goal: p100 < 10 s), all finished after "
                f"{r.finished:.1f} s, lost {r.lost}"
            )
            async with scratch_postgres_database(server) as database:
                rolling = await rolling_restart(database, cwd)
            twice = sum(n > 1 for n in rolling.finals.values())
            print(
                f"   rolling restart at full Slack load (a front end, a worker joined, the old one "
                f"stopped): {len(rolling.rate_limited)} 429s, {len(rolling.finals)} runs, {twice} final "
                "answers posted twice (goal: 0 and 0)"
            )
            (cwd / "outage").mkdir()
            gone = await database_outage(cwd / "outage", outage=DB_OUTAGE)
            twice = sum(n > 1 for n in gone.finals.values())
            taken = sum("janitor: took over" in text for text in gone.logs.values())
            print(
                f"   PostgreSQL stopped {DB_OUTAGE:.0f} s mid-run ({OUTAGE_RUNS} runs, a front end and two "
                f"workers): all final answers {gone.finished_after:.1f} s after it was back; "
                f"{OUTAGE_RUNS - len(gone.finals)} lost, {twice} posted twice, {taken} live workers "
                "taken for dead (goal: 0, 0, 0)"
            )
            (cwd / "disk").mkdir()
            full = await full_disk(cwd / "disk", full_for=DISK_FULL)
            twice = sum(n > 1 for n in full.finals.values())
            print(
                f"   disk full {DISK_FULL:.0f} s mid-run (SQLite, 2 runs, one started while full): ready "
                f"{full.ready_after:.1f} s and all final answers {full.finished_after:.1f} s after space "
                f"came back; {2 - len(full.finals)} lost, {twice} posted twice, then none after a restart "
                "(goal: 0, 0)"
            )
            (cwd / "slack").mkdir()
            away = await slack_outage(cwd / "slack", outage=SLACK_OUTAGE)
            lost = SLACK_RUNS - min(away.finals, away.statuses, away.asked)
            print(
                f"   Slack answering 503 for {SLACK_OUTAGE:.0f} s (SQLite, {SLACK_RUNS} runs asking while it "
                f"is away): every approval request in Slack {away.seen_after:.1f} s after it was back; "
                f"{lost} lost, {len(away.doubled)} posted twice, {len(away.side)} approved commands run "
                f"for {SLACK_RUNS} approvals (goal: 0, 0, {SLACK_RUNS})"
            )
        finally:
            _postgres("stop", pg)


def main() -> None:
    """Print the figures."""
    asyncio.run(_main())
