"""Model adapters: process start to first request, and per-turn overhead against the loopback server.

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

from orchestrator.llm.base import UserMessage
from orchestrator.llm.factory import make_model_client
from tests.fakes.provider_server import ProviderServer, Reply

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


def main() -> None:
    """Print the figures."""
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # warm the interpreter binary
    asyncio.run(run())


if __name__ == "__main__":
    main()
