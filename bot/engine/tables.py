"""The engine's own tables in the bot's database: controls for runs anywhere, workers' heartbeats.

A Cancel or Finish now clicked on any front end is a row here; the worker holding the run picks
it up. Heartbeats tell the janitor which workers are alive.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine

Action = Literal["cancel", "finish"]

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


@dataclass(frozen=True, slots=True)
class Control:
    """A stop asked for a run, from any process."""

    run_id: str
    action: Action
    by: str | None


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

    async def beat(self, executor_id: str, role: str, version: str, *, at: float | None = None) -> None:
        """This executor is alive (`at=0.0`: it left for good, take its runs over now)."""
        table = engine_heartbeats
        now = time.time() if at is None else at
        async with self._engine.begin() as conn:
            done = await conn.execute(
                update(table)
                .where(table.c.executor_id == executor_id)
                .values(role=role, application_version=version, beat_at=now)
            )
            if done.rowcount == 0:
                values = {"executor_id": executor_id, "role": role, "application_version": version}
                await conn.execute(insert(table).values(beat_at=now, **values))

    async def silent(self, *, since: float, but: str) -> list[str]:
        """Executors (workers) whose last heartbeat is older than `since`, other than `but`."""
        table = engine_heartbeats
        async with self._engine.connect() as conn:
            rows = await conn.execute(
                select(table.c.executor_id).where(
                    table.c.beat_at < since, table.c.executor_id != but, table.c.role != "frontend"
                )
            )
            return [r.executor_id for r in rows]

    async def forget(self, executor_ids: list[str]) -> None:
        """Drop heartbeats of executors whose runs were taken over."""
        async with self._engine.begin() as conn:
            table = engine_heartbeats
            await conn.execute(delete(table).where(table.c.executor_id.in_(executor_ids)))


__all__ = ["Action", "Control", "EngineTables"]
