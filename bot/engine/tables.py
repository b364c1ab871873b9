"""The engine's own tables in the bot's database: controls for runs anywhere, workers' heartbeats,
the provider limits' leased permits.

A Cancel or Finish now clicked on any front end is a row here; the worker holding the run picks
it up. Heartbeats tell the janitor which workers are alive. A heartbeat's time is the database's
own clock, and so is the age it is judged by: no two machines' clocks are ever compared.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    func,
    insert,
    literal,
    select,
    type_coerce,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

Action = Literal["cancel", "finish"]
LEFT = 0.0  # the beat of a worker that left for good: its runs may be taken over at once

metadata = MetaData()

engine_controls = Table(
    "engine_controls",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(128), nullable=False, index=True),
    Column("action", String(16), nullable=False),
    Column("by_user", String(128), nullable=True),
    Column("at", Float, nullable=False),
    Column("done", Boolean, nullable=False, default=False),
)

engine_heartbeats = Table(
    "engine_heartbeats",
    metadata,
    Column("executor_id", String(128), primary_key=True),
    Column("role", String(16), nullable=False),
    Column("application_version", String(64), nullable=False),
    Column("beat_at", Float, nullable=False),
)

# Leased permits of the fleet-wide provider limits (`bot.engine.limits`): free once `lease_until`
# (the database's clock) has passed.
provider_permits = Table(
    "provider_permits",
    metadata,
    Column("provider", String(64), primary_key=True),
    Column("kind", String(8), primary_key=True),  # "rate" or "slot" (`bot.engine.limits`)
    Column("slot", Integer, primary_key=True),
    Column("holder", String(160), nullable=True),  # the process that claimed it last
    Column("lease_until", Float, nullable=False),  # the database's clock: free once it has passed
    Column("wanted_by", String(160), nullable=True),  # a waiting process it is reserved for ...
    Column("wanted_until", Float, nullable=True),  # ... until then (its waiter renews it each poll)
    Index("ix_provider_permits_free", "provider", "kind", "lease_until"),
)


@dataclass(frozen=True, slots=True)
class Control:
    """A stop asked for a run, from any process."""

    run_id: str
    action: Action
    by: str | None


@dataclass(frozen=True, slots=True)
class Silent:
    """A worker whose heartbeat stopped; `left`: it said it left for good (no proof needed)."""

    executor_id: str
    left: bool


def database_now(engine: AsyncEngine, *, stable: bool = False) -> ColumnElement[float]:
    """The database's clock, in seconds since the epoch (an SQL expression).

    `stable`: on PostgreSQL, the transaction's start (one value for the whole statement, which an
    index can be searched by; `clock_timestamp()` is read again for every row), for short
    transactions. SQLite reads its clock once per statement anyway.
    """
    if engine.dialect.name == "postgresql":
        clock = func.now() if stable else func.clock_timestamp()
        return type_coerce(func.extract("epoch", clock), Float)
    return (func.julianday("now") - 2440587.5) * 86400.0  # SQLite: to the millisecond


class EngineTables:
    """Controls and heartbeats over the bot's SQLAlchemy engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create_schema(self) -> None:
        """Create the tables when missing."""
        async with self._engine.begin() as conn:
            await conn.run_sync(metadata.create_all)

    async def ask(self, run_id: str, action: Action, by: str | None) -> None:
        """Record a control for the worker that holds the run."""
        values = {"run_id": run_id, "action": action, "by_user": by, "at": time.time(), "done": False}
        async with self._engine.begin() as conn:
            await conn.execute(insert(engine_controls).values(**values))

    async def take(self, run_ids: list[str]) -> list[Control]:
        """The controls waiting for these runs, marked done (each is taken once)."""
        if not run_ids:
            return []
        table = engine_controls
        async with self._engine.begin() as conn:
            rows = (
                await conn.execute(
                    select(table.c.id, table.c.run_id, table.c.action, table.c.by_user)
                    .where(table.c.run_id.in_(run_ids), table.c.done.is_(False))
                    .order_by(table.c.id)
                )
            ).all()
            if rows:
                ids = [r.id for r in rows]
                await conn.execute(update(table).where(table.c.id.in_(ids)).values(done=True))
        return [Control(r.run_id, "finish" if r.action == "finish" else "cancel", r.by_user) for r in rows]

    def _now(self) -> ColumnElement[float]:
        return database_now(self._engine)

    async def beat(self, executor_id: str, role: str, version: str, *, left: bool = False) -> None:
        """This executor is alive, at the database's time (`left`: it left for good, take its runs now)."""
        table = engine_heartbeats
        now: ColumnElement[float] = literal(LEFT) if left else self._now()
        async with self._engine.begin() as conn:
            done = await conn.execute(
                update(table)
                .where(table.c.executor_id == executor_id)
                .values(role=role, application_version=version, beat_at=now)
            )
            if done.rowcount == 0:
                values = {"executor_id": executor_id, "role": role, "application_version": version}
                await conn.execute(insert(table).values(beat_at=now, **values))

    async def live(self, *, within: float) -> int:
        """How many executors (any role) beat in the last `within` s and did not leave, by the
        database's clock: the processes sharing the workspace's Slack budget."""
        table = engine_heartbeats
        async with self._engine.connect() as conn:
            count = await conn.scalar(
                select(func.count()).where(table.c.beat_at >= self._now() - within, table.c.beat_at != LEFT)
            )
        return int(count or 0)

    async def silent(self, *, older_than: float, but: str) -> list[Silent]:
        """Workers but `but` whose last heartbeat is `older_than` s old or more, by the database's clock."""
        table = engine_heartbeats
        async with self._engine.connect() as conn:
            rows = await conn.execute(
                select(table.c.executor_id, table.c.beat_at).where(
                    table.c.beat_at < self._now() - older_than,
                    table.c.executor_id != but,
                    table.c.role != "frontend",
                )
            )
            return [Silent(r.executor_id, left=r.beat_at == LEFT) for r in rows]

    async def forget(self, executor_ids: list[str]) -> None:
        """Drop heartbeats of executors whose runs were taken over."""
        async with self._engine.begin() as conn:
            table = engine_heartbeats
            await conn.execute(delete(table).where(table.c.executor_id.in_(executor_ids)))


__all__ = ["LEFT", "Action", "Control", "EngineTables", "Silent", "database_now", "provider_permits"]
