"""Model adapters: process start to first request, and per-turn overhead against the loopback server.

Also what a provider limit (`MASSGEN_PROVIDER_LIMITS`, leased permits in the database) adds to each call.

Start-up is measured from spawning a fresh interpreter that builds a client with
`make_model_client` and streams one turn, to the moment the server receives that request
(CLOCK_MONOTONIC is shared across processes on Linux). Turn figures are in-process, sequential
and concurrent, with the real SDKs doing the HTTP and SSE parsing.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.llm.base import UserMessage
from orchestrator.llm.factory import make_model_client
from orchestrator.ports import CallAdmission
from tests.fakes.provider_server import ProviderServer, Reply

if TYPE_CHECKING:
    from bot.engine.limits import ProviderLimits

ROOT = Path(__file__).resolve().parent.parent
TYPES = ("openai", "chatcompletion", "claude")
CHILD = """
import asyncio, sys
from orchestrator.llm.base import UserMessage
from orchestrator.llm.factory import make_model_client
async def main():
    client = make_model_client(type=sys.argv[1], model="m", base_url=sys.argv[2])
    async for _ in client.stream_turn(system="", messages=[UserMessage(text="hi")], tools=[]):
        pass
    await client.close()
asyncio.run(main())
"""
TEXT = " ".join(f"word{i}" for i in range(60))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def startup(server: ProviderServer, kind: str, env: dict[str, str], runs: int = 3) -> list[float]:
    """Seconds from spawn to the request reaching the server, per run."""
    url = server.anthropic_base_url if kind == "claude" else server.openai_base_url
    out = []
    for _ in range(runs):
        seen = len(server.requests)
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", CHILD, kind, url, env=env)
        await proc.wait()
        out.append(server.requests[seen].received_at - started)
    return out


async def turns(server: ProviderServer, kind: str, n: int, concurrency: int) -> tuple[list[float], float]:
    """Per-turn latencies and wall time for `n` streamed turns, `concurrency` at a time."""
    url = server.anthropic_base_url if kind == "claude" else server.openai_base_url
    client = make_model_client(type=kind, model="m", base_url=url)
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one() -> None:
        async with gate:
            t0 = time.perf_counter()
            async for _ in client.stream_turn(system="", messages=[UserMessage(text="hi")], tools=[]):
                pass
            latencies.append(time.perf_counter() - t0)

    wall = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    wall = time.perf_counter() - wall
    await client.close()
    return latencies, wall


async def run() -> None:
    async with ProviderServer(lambda _: Reply(text=TEXT)) as server:
        base = {**os.environ, "PYTHONPATH": str(ROOT)}
        with tempfile.TemporaryDirectory() as cache:
            # Installed packages normally carry compiled bytecode; this environment may forbid
            # writing it (PYTHONDONTWRITEBYTECODE), which makes every import compile from source.
            compiled = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
            compiled["PYTHONPYCACHEPREFIX"] = cache
            for label, env in (("as configured", base), ("bytecode cached", compiled)):
                print(f"start-up to first request, fresh interpreter, {label} (s): median / max of 3")
                for kind in TYPES:
                    values = await startup(server, kind, env)
                    print(f"  {kind:15s} {statistics.median(values):.2f} / {max(values):.2f}")
        print(f"streamed turns ({len(TEXT.split())} text deltas each)")
        for kind in TYPES:
            for n, conc in ((50, 1), (100, 20)):
                lat, wall = await turns(server, kind, n, conc)
                print(
                    f"  {kind:15s} n={n:3d} concurrency={conc:2d}: p50 {pct(lat, 0.5) * 1000:.1f} ms, "
                    f"p95 {pct(lat, 0.95) * 1000:.1f} ms, {n / wall:.0f} turns/s"
                )


async def admission_overhead(n: int = 60) -> None:
    """What a provider limit adds to each model call: leased permits in the bot's database, never full.

    On SQLite through the engine as the bot runs it, and on PostgreSQL when `DATABASE_URL_POSTGRES`
    names a server. `wait` is the admission (the claim's transaction, and this process's limiter);
    `release` is the end of a concurrency slot, after the call. Before the leased permits (a DBOS
    permit workflow per call, queue poll 50 ms): wait p50 72 ms / p99 141 ms with a rate limit,
    p50 121 ms / p99 310 ms with a rate and a concurrency limit (docs/measured.md, an earlier run).
    """
    from approvals.sql import make_engine
    from bot.engine import Engine, EngineConfig
    from bot.settings import BotSettings, ProviderLimit

    poll = BotSettings.with_values().provider_poll  # the default
    limits = {
        "chatcompletion": ProviderLimit(requests=10_000, period=60.0),
        "anthropic": ProviderLimit(requests=10_000, period=60.0, concurrent=1000),
    }
    with tempfile.TemporaryDirectory() as folder:
        config = EngineConfig(
            system_database_url=f"sqlite:///{folder}/dbos.sqlite", limits=limits, limit_poll=poll
        )
        database = make_engine(f"sqlite:///{folder}/bot.db")  # as the bot's: WAL
        engine = Engine(config, database)
        await engine.launch(None)
        await _admission_rows(engine.admission, "SQLite, through the engine", n)
        await engine.close()
        await database.dispose()
    server = os.environ.get("DATABASE_URL_POSTGRES")
    if server:
        await _admission_postgres(server, limits, poll, n)


async def _admission_postgres(server: str, limits: dict[str, Any], poll: float, n: int) -> None:
    from approvals.sql import make_engine
    from approvals.testing import scratch_postgres_database
    from bot.engine.limits import ProviderLimits
    from bot.engine.tables import EngineTables

    async with scratch_postgres_database(server) as url:
        database = make_engine(url)
        await EngineTables(database).create_schema()
        admission = ProviderLimits(limits, database, poll=poll)
        await admission.register(update=True)
        await _admission_rows(admission, "PostgreSQL (loopback)", n)
        await database.dispose()


async def _admission_rows(admission: ProviderLimits, where: str, n: int) -> None:
    """Print the added wait (and release) per call, for a rate limit and for a rate and concurrency limit."""
    waits: list[float] = []
    admission.observe = lambda _provider, seconds: waits.append(seconds)
    print(f"admission under a provider limit (leased permits, {where}), n={n}")
    async with ProviderServer(lambda _: Reply(text=TEXT)) as server:
        for kind, url, what in (
            ("chatcompletion", server.openai_base_url, "rate limit"),
            ("claude", server.anthropic_base_url, "rate + concurrency limit"),
        ):
            plain, _ = await turns(server, kind, n, 1)
            waits.clear()
            limited = await _limited_turns(admission, kind, url, n)
            wait = " / ".join(f"{pct(waits, q) * 1000:.1f}" for q in (0.5, 0.95, 0.99))
            print(
                f"  {what:25s} wait p50/p95/p99 {wait} ms; turn p50 {pct(plain, 0.5) * 1000:.1f} ms "
                f"unlimited, {pct(limited, 0.5) * 1000:.1f} ms limited"
            )


async def _limited_turns(admission: CallAdmission, kind: str, url: str, n: int) -> list[float]:
    """Per-turn latencies of `n` sequential turns, each admitted by `admission`."""
    client = make_model_client(type=kind, model="m", base_url=url, admission=admission)
    latencies: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        async for _item in client.stream_turn(system="", messages=[UserMessage(text="hi")], tools=[]):
            pass
        latencies.append(time.perf_counter() - t0)
    await client.close()
    return latencies


def main() -> None:
    """Print the figures."""
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # warm the interpreter binary
    asyncio.run(run())
    asyncio.run(admission_overhead())


if __name__ == "__main__":
    main()
