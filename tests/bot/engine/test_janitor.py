"""No false deaths (SQLite, in process): a stale heartbeat is no proof while the database was away.

The outage is real: the bot's database file is moved away and a folder put in its place, so every
new connection fails (the engine is given no pool: each access opens the file again), then the
file comes back. The janitor judges a worker only after reaching the database for `dead_after`
without a failure; a worker whose beats fail fences itself before anyone may judge it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from bot.engine import Engine, EngineConfig
from bot.engine.tables import EngineTables, engine_heartbeats

DEAD_AFTER = 1.0


@dataclass
class Database:
    """The bot's SQLite database, which a test can take away and give back."""

    path: Path
    engine: AsyncEngine = field(init=False)

    def __post_init__(self) -> None:
        self.engine = create_async_engine(f"sqlite+aiosqlite:///{self.path}", poolclass=NullPool)

    @contextlib.contextmanager
    def away(self) -> Iterator[None]:
        """The database cannot be opened inside the block."""
        aside = self.path.with_suffix(".aside")
        self.path.rename(aside)
        self.path.mkdir()
        try:
            yield
        finally:
            self.path.rmdir()
            aside.rename(self.path)

    async def beats(self) -> set[str]:
        """The executors with a heartbeat row."""
        async with self.engine.connect() as conn:
            return set((await conn.execute(select(engine_heartbeats.c.executor_id))).scalars())


@dataclass
class Executions:
    """A run executor that records the runs it was asked to execute (what a worker would drive)."""

    started: list[str] = field(default_factory=list)

    async def execute(self, run_id: str, payload: dict[str, Any]) -> str:
        self.started.append(run_id)
        return "run_finished"


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    db = Database(tmp_path / "bot.db")
    try:
        yield db
    finally:
        await db.engine.dispose()


@contextlib.asynccontextmanager
async def launched(
    tmp_path: Path, database: Database, executor: Executions | None = None, *, interval: float = 3600.0
) -> AsyncIterator[Engine]:
    config = EngineConfig(
        system_database_url=f"sqlite:///{tmp_path / 'dbos.sqlite'}",
        executor_id="judge",
        role="worker",
        poll_interval=0.05,
        heartbeat_interval=interval,  # the tests beat by hand unless they say otherwise
        dead_after=DEAD_AFTER,
    )
    engine = Engine(config, database.engine)
    await engine.launch(executor)
    try:
        yield engine
    finally:
        await engine.close()


async def _beat_for(engine: Engine, seconds: float, *, also: EngineTables | None = None) -> None:
    """The judge beats (and judges) for `seconds`; `also`: the victim beats all along too."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if also is not None:
            await also.beat("victim", "worker", "0")
        await engine.heartbeat()
        await asyncio.sleep(0.05)


async def test_a_heartbeat_gone_stale_while_the_database_was_away_is_no_proof_of_death(
    tmp_path: Path, database: Database
) -> None:
    async with launched(tmp_path, database) as judge:
        victim = EngineTables(database.engine)
        await victim.beat("victim", "worker", "0")
        await _beat_for(judge, 0.3)
        with database.away():  # neither can beat: the victim's beat grows older than dead_after
            with pytest.raises(Exception):  # noqa: B017, PT011  # whatever the driver says
                await judge.heartbeat()
            await asyncio.sleep(DEAD_AFTER + 0.3)
        await judge.heartbeat()  # back: the victim's beat is stale, the judge has just come back
        assert judge.up_for() < DEAD_AFTER
        assert "victim" in await database.beats()  # not judged (the old janitor took it over here)
        await _beat_for(judge, DEAD_AFTER + 0.3, also=victim)  # alive: it beats again
        assert "victim" in await database.beats()
        assert judge.recovered == []
        # Now it really stops, with the database up all along: it is taken over after dead_after.
        await _beat_for(judge, DEAD_AFTER + 0.3)
        assert "victim" not in await database.beats()


async def test_a_worker_that_left_is_taken_over_by_a_judge_just_up(
    tmp_path: Path, database: Database
) -> None:
    async with launched(tmp_path, database) as judge:
        victim = EngineTables(database.engine)
        await victim.beat("stale", "worker", "0")
        await victim.beat("gone", "worker", "0", left=True)
        await asyncio.sleep(DEAD_AFTER + 0.1)
        assert judge.up_for() < DEAD_AFTER + 0.5  # launched a moment ago
        await judge.heartbeat()
        beats = await database.beats()
        assert "gone" not in beats  # it said it left: no proof needed
        assert "stale" in beats or judge.up_for() >= DEAD_AFTER


async def test_a_worker_that_cannot_store_its_heartbeat_fences_itself_before_it_may_be_judged(
    tmp_path: Path, database: Database
) -> None:
    executions = Executions()
    async with launched(tmp_path, database, executions, interval=0.1) as worker:
        fenced_after: list[float] = []

        async def told(silent_for: float) -> None:
            fenced_after.append(silent_for)

        worker.on_fence = told
        with database.away():
            began = time.monotonic()
            while not worker.fenced:
                assert time.monotonic() - began < DEAD_AFTER, "not fenced before it could be judged dead"
                await asyncio.sleep(0.02)
            assert fenced_after
            assert worker.fence_after <= fenced_after[0] < DEAD_AFTER
            assert (await worker.ready() or "").startswith("engine: fenced")  # /readyz says 503
            await worker.submit("run-while-fenced", {})  # DBOS's own database is still here
            await asyncio.sleep(0.8)
            assert executions.started == []  # dequeued, but no step starts on a fenced worker
        deadline = time.monotonic() + 10
        while executions.started != ["run-while-fenced"]:
            assert time.monotonic() < deadline, executions.started
            await asyncio.sleep(0.05)
        assert await worker.ready() is None  # unfenced: ready again
        assert not worker.fenced
