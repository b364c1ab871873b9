"""The bot's own small tables: where each run lives in Slack, and where each approval message is.

The run store (orchestrator) keeps a run's events; the approval store keeps requests. This keeps
only Slack coordinates, so thread follow-ups, App Home history and approval-message updates
survive a restart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import Column, Float, Index, MetaData, String, Table, Text, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

metadata = MetaData()

bot_runs = Table(
    "bot_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("channel", String(32), nullable=False),
    Column("thread_ts", String(32)),  # the thread the run posts into (its status message, or a parent)
    Column("requester", String(32), nullable=False),
    Column("team", String(128), nullable=False),
    Column("task", Text, nullable=False),
    Column("state", String(16), nullable=False),  # running | finished | failed | cancelled
    Column("final_answer", Text),
    Column("created_at", Float, nullable=False),
    Index("ix_bot_runs_thread", "channel", "thread_ts"),
)

bot_approval_messages = Table(
    "bot_approval_messages",
    metadata,
    Column("request_id", String(128), primary_key=True),
    Column("channel", String(32), nullable=False),
    Column("ts", String(32), nullable=False),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BotRun:
    """A run as the bot placed it in Slack."""

    run_id: str
    channel: str
    thread_ts: str | None
    requester: str
    team: str
    task: str
    state: str
    final_answer: str | None
    created_at: float


class BotStore:
    """SQL access to the bot's tables (SQLite or PostgreSQL through one async engine)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create_schema(self) -> None:
        """Create the tables if missing (idempotent)."""
        async with self._engine.begin() as conn:
            await conn.run_sync(metadata.create_all)

    async def record_run(self, *, run_id: str, channel: str, requester: str, team: str, task: str) -> None:
        """A new run, `running` until `finish_run`."""
        async with self._engine.begin() as conn:
            await conn.execute(
                insert(bot_runs).values(
                    run_id=run_id,
                    channel=channel,
                    thread_ts=None,
                    requester=requester,
                    team=team,
                    task=task,
                    state="running",
                    created_at=time.time(),
                )
            )

    async def set_thread(self, run_id: str, thread_ts: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                update(bot_runs).where(bot_runs.c.run_id == run_id).values(thread_ts=thread_ts)
            )

    async def finish_run(self, run_id: str, *, state: str, final_answer: str | None) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                update(bot_runs)
                .where(bot_runs.c.run_id == run_id)
                .values(state=state, final_answer=final_answer)
            )

    async def get_run(self, run_id: str) -> BotRun | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(bot_runs).where(bot_runs.c.run_id == run_id))).first()
        return None if row is None else BotRun(**row._mapping)

    async def run_for_thread(self, channel: str, thread_ts: str) -> BotRun | None:
        """The latest run posting into this thread (follow-ups post into their parent's thread)."""
        query = (
            select(bot_runs)
            .where(bot_runs.c.channel == channel, bot_runs.c.thread_ts == thread_ts)
            .order_by(bot_runs.c.created_at.desc())
            .limit(1)
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else BotRun(**row._mapping)

    async def recent_runs(self, *, channel: str | None = None, limit: int = 10) -> list[BotRun]:
        query = select(bot_runs).order_by(bot_runs.c.created_at.desc()).limit(limit)
        if channel is not None:
            query = query.where(bot_runs.c.channel == channel)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [BotRun(**row._mapping) for row in rows]

    async def running_runs(self) -> list[BotRun]:
        """Runs still marked running (after a restart: the ones the previous process left behind)."""
        query = select(bot_runs).where(bot_runs.c.state == "running")
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [BotRun(**row._mapping) for row in rows]

    async def record_approval_message(self, request_id: str, channel: str, ts: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                insert(bot_approval_messages).values(request_id=request_id, channel=channel, ts=ts)
            )

    async def approval_message(self, request_id: str) -> tuple[str, str] | None:
        """(channel, ts) of the message showing this request, if one was posted."""
        query = select(bot_approval_messages).where(bot_approval_messages.c.request_id == request_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else (row.channel, row.ts)
