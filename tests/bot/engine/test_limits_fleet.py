"""Provider limits held by separate worker processes together, on SQLite and PostgreSQL.

Each worker is a real process taking leased permits from one database (`limit_worker`); the
proof is the wall-clock intervals they report: never more in flight than the concurrency limit,
never more starts in a window than the rate limit, and a slot held by a worker killed with
SIGKILL free again within its lease, long before a janitor's `dead_after`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from approvals.sql import make_engine
from bot.engine.tables import EngineTables
from tests.bot.engine.test_limits import most_in_a_window
from tests.conftest import SQL_DATABASES, empty_database

WORKER = [sys.executable, "-m", "tests.bot.engine.limit_worker"]
ROOT = Path(__file__).resolve().parents[3]
LEASE = 1.5  # seconds: a killed worker's slot is free this long after its last renewal, at most


@pytest.fixture(params=SQL_DATABASES)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    async with empty_database(request.param, f"sqlite:///{tmp_path / 'bot.db'}") as url:
        engine = make_engine(url)
        await EngineTables(engine).create_schema()  # as `db upgrade` does before workers start
        await engine.dispose()
        yield url


@contextlib.asynccontextmanager
async def _worker(
    url: str, limits: str, calls: int, hold: float
) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await asyncio.create_subprocess_exec(
        *WORKER, url, limits, str(calls), str(hold), str(LEASE),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def _line(proc: asyncio.subprocess.Process, within: float = 30) -> str:
    assert proc.stdout is not None
    async with asyncio.timeout(within):
        return (await proc.stdout.readline()).decode().strip()


async def _go(*procs: asyncio.subprocess.Process) -> None:
    """Once every worker is ready, let them all start."""
    for proc in procs:
        assert await _line(proc) == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()


async def _intervals(proc: asyncio.subprocess.Process, calls: int) -> list[tuple[float, float]]:
    out = []
    for _ in range(calls):
        start, end = (await _line(proc, 60)).split()
        out.append((float(start), float(end)))
    return out


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals overlapping at any moment (an end before a start at the same instant)."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_the_overlap_count_sees_two_at_once() -> None:  # the property below could not fail without it
    assert most_at_once([(0.0, 1.0), (0.5, 1.5)]) == 2
    assert most_at_once([(0.0, 1.0), (1.0, 2.0)]) == 1


async def test_two_workers_never_exceed_a_concurrency_limit_of_one(database: str) -> None:
    calls, hold = 8, 0.1
    async with (
        _worker(database, "openai.concurrent=1", calls, hold) as one,
        _worker(database, "openai.concurrent=1", calls, hold) as two,
    ):
        await _go(one, two)
        first, second = await asyncio.gather(_intervals(one, calls), _intervals(two, calls))
    assert most_at_once(first + second) == 1
    # Both took turns (no one starved): each ran its calls while the other was running too.
    assert min(s for s, _ in second) < max(e for _, e in first)
    assert min(s for s, _ in first) < max(e for _, e in second)


async def test_a_killed_workers_slot_is_free_within_its_lease(database: str) -> None:
    async with _worker(database, "openai.concurrent=1", 0, 0) as holder:
        await _go(holder)
        assert await _line(holder) == "held"
        async with _worker(database, "openai.concurrent=1", 1, 0.0) as waiter:
            await _go(waiter)
            await asyncio.sleep(LEASE)  # the waiter waits: the slot is held and renewed
            holder.send_signal(signal.SIGKILL)
            killed = time.time()
            [(start, _)] = await _intervals(waiter, 1)
    assert start - killed < LEASE + 1.0  # the lease ran out; a janitor would have waited dead_after


async def test_a_slot_held_and_renewed_is_not_taken(database: str) -> None:
    """The other side of the lease: a live holder keeps its slot past many leases."""
    async with _worker(database, "openai.concurrent=1", 1, 3 * LEASE) as holder:
        await _go(holder)
        first = asyncio.ensure_future(_intervals(holder, 1))
        await asyncio.sleep(0.5)
        async with _worker(database, "openai.concurrent=1", 1, 0.0) as waiter:
            await _go(waiter)
            second = await _intervals(waiter, 1)
        [(_, held_until)] = await first
    assert second[0][0] >= held_until - 0.05  # only once the holder let go


async def test_a_stalled_holder_takes_a_freed_slot_before_another_caller(database: str) -> None:
    """A holder stopped past its lease loses its slot to another; resumed, its call still running,
    it takes the next slot freed, so a third caller cannot make it three (over by one at most,
    and only until a slot frees)."""
    async with _worker(database, "openai.concurrent=1", 0, 0) as stalled:
        await _go(stalled)
        assert await _line(stalled) == "held"
        stalled.send_signal(signal.SIGSTOP)
        stopped = time.time()
        async with (
            _worker(database, "openai.concurrent=1", 1, 3 * LEASE) as taker,
            _worker(database, "openai.concurrent=1", 1, 0.0) as late,
        ):
            await _go(taker)
            await asyncio.sleep(2.2 * LEASE - (time.time() - stopped))
            stalled.send_signal(signal.SIGCONT)  # during the taker's call: it finds its slot taken
            [(took, freed)] = await _intervals(taker, 1)
            assert took - stopped > 0.9 * LEASE  # the stalled holder's lease had to run out first
            await asyncio.sleep(LEASE / 2)  # past the resumed holder's next renewal (every LEASE / 4)
            await _go(late)
            await asyncio.sleep(LEASE)
            stalled.send_signal(signal.SIGKILL)
            killed = time.time()
            [(start, _)] = await _intervals(late, 1)
    assert start >= killed - 0.05  # it waited for the resumed holder, not only for the taker
    assert start - freed > LEASE


async def test_two_workers_hold_a_rate_limit_together(database: str) -> None:
    limit, period, calls = 4, 1.0, 8
    limits = f"openai={limit}/{period}s"
    async with _worker(database, limits, calls, 0.0) as one, _worker(database, limits, calls, 0.0) as two:
        await _go(one, two)
        first, second = await asyncio.gather(_intervals(one, calls), _intervals(two, calls))
    starts = [s for s, _ in first + second]
    assert most_in_a_window(starts, period) <= limit
    # Sixteen requests at four a period: three periods at least (an unlimited pair takes ~0 s).
    assert max(starts) - min(starts) >= 3 * period
