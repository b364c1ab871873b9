"""The bot's own small tables: Slack coordinates only, so messages can be found again after a restart.

A run's state (task, requester, status, final answer) lives in the orchestrator's run store, and
an approval's in the approval store. This keeps where each is in Slack: a run's channel, its status
message (root ts) and the thread it posts into; an approval request's message.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Column, Float, Index, MetaData, String, Table, insert, inspect, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

metadata = MetaData()

slack_runs = Table(
    "slack_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("channel", String(32), nullable=False),
    Column("root_ts", String(32)),  # the run's status message, once Slack gave its ts
    Column("thread_ts", String(32)),  # the thread it posts into (its status message, or a parent's)
    Column("created_at", Float, nullable=False),
    Index("ix_slack_runs_thread", "channel", "thread_ts"),
)

bot_approval_messages = Table(
    "bot_approval_messages",
    metadata,
    Column("request_id", String(128), primary_key=True),
    Column("channel", String(32), nullable=False),
    Column("ts", String(32), nullable=False),
)

# Before runs had one truth, the bot kept a copy of each run in `bot_runs`; its coordinates move over.
_FROM_BOT_RUNS = text(
    "INSERT INTO slack_runs (run_id, channel, root_ts, thread_ts, created_at) "
    "SELECT run_id, channel, thread_ts, thread_ts, created_at FROM bot_runs "
    "WHERE run_id NOT IN (SELECT run_id FROM slack_runs)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCoordinates:
    """Where one run lives in Slack."""

    run_id: str
    channel: str
    root_ts: str | None
    thread_ts: str | None


def _create(conn: Connection) -> None:
    metadata.create_all(conn)
    if inspect(conn).has_table("bot_runs"):
        conn.execute(_FROM_BOT_RUNS)


class BotStore:
    """SQL access to the Slack coordinates (SQLite or PostgreSQL through one async engine)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create_schema(self) -> None:
        """Create the tables if missing (idempotent); carries coordinates over from `bot_runs`."""
        async with self._engine.begin() as conn:
            await conn.run_sync(_create)

    async def record_run(self, run_id: str, channel: str, *, thread_ts: str | None = None) -> None:
        """A new run in `channel` (a follow-up posts into its parent's thread `thread_ts`)."""
        values = {"run_id": run_id, "channel": channel, "thread_ts": thread_ts, "created_at": time.time()}
        async with self._engine.begin() as conn:
            await conn.execute(insert(slack_runs).values(**values))

    async def set_root(self, run_id: str, root_ts: str) -> None:
        """The status message's ts; it is also the run's thread unless it follows up in a parent's."""
        query = select(slack_runs.c.thread_ts).where(slack_runs.c.run_id == run_id)
        async with self._engine.begin() as conn:
            thread = (await conn.execute(query)).scalar_one_or_none()
            changes = {"root_ts": root_ts, "thread_ts": thread or root_ts}
            await conn.execute(update(slack_runs).where(slack_runs.c.run_id == run_id).values(**changes))

    async def coordinates(self, run_ids: Iterable[str]) -> dict[str, RunCoordinates]:
        """Where each of these runs lives (runs Slack never saw are left out)."""
        ids = list(run_ids)
        if not ids:
            return {}
        query = select(slack_runs).where(slack_runs.c.run_id.in_(ids))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {
            row.run_id: RunCoordinates(
                run_id=row.run_id, channel=row.channel, root_ts=row.root_ts, thread_ts=row.thread_ts
            )
            for row in rows
        }

    async def run_in_thread(self, channel: str, thread_ts: str) -> str | None:
        """The latest run posting into this thread (follow-ups post into their parent's thread)."""
        query = (
            select(slack_runs.c.run_id)
            .where(slack_runs.c.channel == channel, slack_runs.c.thread_ts == thread_ts)
            .order_by(slack_runs.c.created_at.desc())
            .limit(1)
        )
        async with self._engine.connect() as conn:
            return (await conn.execute(query)).scalar_one_or_none()

    async def record_approval_message(self, request_id: str, channel: str, ts: str) -> None:
        """Where the message showing this approval request was posted."""
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
