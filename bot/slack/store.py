"""The bot's own small tables: Slack coordinates, and the outbox's pending Slack posts.

A run's state (task, requester, status, final answer) lives in the orchestrator's run store, and
an approval's in the approval store. This keeps where each is in Slack: a run's channel, its status
message (root ts) and the thread it posts into; an approval request's message. `slack_outbox` is
the transactional outbox: every post is written here before it is sent, so a restart sends what
the previous process had not.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    func,
    insert,
    inspect,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.engine import Connection, Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import ColumnElement

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

# DM copies of an approval request (approvers who cannot see the run's thread), kept in sync with it.
bot_approval_copies = Table(
    "bot_approval_copies",
    metadata,
    Column("request_id", String(128), primary_key=True),
    Column("channel", String(32), primary_key=True),
    Column("ts", String(32), nullable=False),
)

slack_outbox = Table(
    "slack_outbox",
    metadata,
    Column("id", String(96), primary_key=True),  # a post's marker; "u:…" for a message's wanted state
    Column("kind", String(8), nullable=False, default="post"),  # post | update
    Column("seq", Integer, nullable=False),  # send order within a channel (with priority)
    Column("channel", String(32), nullable=False),
    Column("kwargs", Text, nullable=False),  # the chat.postMessage arguments, JSON
    Column("root_id", String(64)),  # the outbox post this one replies to, while its ts is unknown
    Column("thread_ts", String(32)),  # the thread it replies to, once known
    Column("priority", Integer, nullable=False),
    Column("run_id", String(64)),
    Column("status", String(16), nullable=False),  # pending | sent | failed
    Column("attempts", Integer, nullable=False, default=0),  # > 0: it may have reached Slack
    Column("next_attempt_at", Float, nullable=False),
    Column("last_error", Text),
    Column("ts", String(32)),  # a post's ts once sent; an update's message, once known
    Column("created_at", Float, nullable=False),
    # The executor that saved the post (MASSGEN_EXECUTOR_ID): a restart resends only its own; the
    # janitor's takeover of a dead worker adopts the dead one's (None: saved before owners existed).
    Column("owner", String(128)),
    Index("ix_slack_outbox_status", "status", "seq"),
)

# What the migrations (`bot/migrations`) keep in step with: the Slack coordinates and the outbox.
bot_metadata = metadata

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

    async def probe_write(self) -> None:
        """Write a row and remove it, committed: raises when the database or its disk takes no writes.

        A `SELECT 1` passes on a full disk or a read-only database; /readyz needs a write.
        """
        probe = f"readyz-{uuid.uuid4().hex}"
        async with self._engine.begin() as conn:
            await conn.execute(insert(slack_runs).values(run_id=probe, channel="-", created_at=time.time()))
            await conn.execute(delete(slack_runs).where(slack_runs.c.run_id == probe))

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

    async def record_approval_copy(self, request_id: str, channel: str, ts: str) -> None:
        """A DM copy of an approval request (one per DM channel)."""
        row = {"request_id": request_id, "channel": channel, "ts": ts}
        async with self._engine.begin() as conn:
            await conn.execute(insert(bot_approval_copies).values(**row))

    async def approval_copies(self, request_id: str) -> list[tuple[str, str]]:
        """Every DM copy of a request: (channel, ts), oldest channel id first."""
        query = (
            select(bot_approval_copies.c.channel, bot_approval_copies.c.ts)
            .where(bot_approval_copies.c.request_id == request_id)
            .order_by(bot_approval_copies.c.channel)
        )
        async with self._engine.connect() as conn:
            return [(row.channel, row.ts) for row in (await conn.execute(query)).all()]

    async def approval_message(self, request_id: str) -> tuple[str, str] | None:
        """(channel, ts) of the message showing this request, if one was posted."""
        query = select(bot_approval_messages).where(bot_approval_messages.c.request_id == request_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else (row.channel, row.ts)


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxRow:
    """One persisted post of the outbox."""

    id: str
    seq: int
    channel: str
    kwargs: dict[str, Any]
    root_id: str | None
    thread_ts: str | None
    priority: int
    run_id: str | None
    status: str
    attempts: int
    ts: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingUpdate:
    """The wanted state of one message (`ts`, or the outbox post `marker` while its ts is unknown)."""

    id: str
    channel: str
    ts: str | None
    marker: str | None
    text: str
    blocks: list[dict[str, Any]] | None
    version: int


def _row(r: Any) -> OutboxRow:
    return OutboxRow(
        id=r.id,
        seq=r.seq,
        channel=r.channel,
        kwargs=json.loads(r.kwargs),
        root_id=r.root_id,
        thread_ts=r.thread_ts,
        priority=r.priority,
        run_id=r.run_id,
        status=r.status,
        attempts=r.attempts,
        ts=r.ts,
    )


class OutboxStore:
    """The outbox's table: posts are saved before they are sent and marked once Slack answered."""

    def __init__(self, engine: AsyncEngine, *, owner: str | None = None) -> None:
        self._engine = engine
        self._owner = owner  # this process's executor id: whose unsent posts `pending()` returns

    async def create_schema(self) -> None:
        """Create the table if missing (idempotent)."""
        async with self._engine.begin() as conn:
            await conn.run_sync(lambda c: metadata.create_all(c, tables=[slack_outbox]))

    async def save(self, row: OutboxRow, conn: AsyncConnection | None = None) -> None:
        """Write a new pending post (inside `conn`'s transaction when given: the transactional outbox)."""
        values = {
            "id": row.id,
            "kind": "post",
            "seq": row.seq,
            "channel": row.channel,
            "kwargs": json.dumps(row.kwargs),
            "root_id": row.root_id,
            "thread_ts": row.thread_ts,
            "priority": row.priority,
            "run_id": row.run_id,
            "status": row.status,
            "attempts": row.attempts,
            "next_attempt_at": time.time(),
            "ts": row.ts,
            "created_at": time.time(),
            "owner": self._owner,
        }
        if conn is not None:
            await conn.execute(insert(slack_outbox).values(**values))
            return
        async with self._engine.begin() as own:
            await own.execute(insert(slack_outbox).values(**values))

    async def exists(self, post_id: str, conn: AsyncConnection) -> bool:
        """Whether a post of this id is saved (read inside `conn`'s transaction)."""
        found = await conn.execute(select(slack_outbox.c.id).where(slack_outbox.c.id == post_id))
        return found.first() is not None

    async def row(self, post_id: str) -> OutboxRow | None:
        """The saved post of this id (sent or not), or None."""
        async with self._engine.connect() as conn:
            found = (await conn.execute(select(slack_outbox).where(slack_outbox.c.id == post_id))).first()
        return None if found is None else _row(found)

    async def attempt(self, post_id: str, *, thread_ts: str | None, next_attempt_at: float) -> bool:
        """About to send: count the attempt (a crash from here on means "maybe delivered"); False
        when the row is not this process's any more (a janitor gave it to another: that one sends it)."""
        query = (
            update(slack_outbox)
            .where(slack_outbox.c.id == post_id, self._mine())
            .values(
                attempts=slack_outbox.c.attempts + 1, thread_ts=thread_ts, next_attempt_at=next_attempt_at
            )
        )
        async with self._engine.begin() as conn:
            return bool((await conn.execute(query)).rowcount)

    async def claim(self, post_id: str) -> bool:
        """After a save collided on `post_id`: whether the row is this very post, saved by this
        process in a commit whose answer was lost (its own, unsent and never tried), not another's."""
        query = select(slack_outbox.c.status, slack_outbox.c.attempts).where(
            slack_outbox.c.id == post_id, self._mine()
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return row is not None and row.status == "pending" and row.attempts == 0

    async def note_error(self, post_id: str, error: str) -> None:
        """A retryable failure: keep the row pending, remember why."""
        async with self._engine.begin() as conn:
            await conn.execute(
                update(slack_outbox).where(slack_outbox.c.id == post_id).values(last_error=error)
            )

    async def sent(self, post_id: str, ts: str) -> None:
        """Slack has the message: never send it again."""
        query = update(slack_outbox).where(slack_outbox.c.id == post_id).values(status="sent", ts=ts)
        async with self._engine.begin() as conn:
            await conn.execute(query)

    async def failed(self, post_id: str, error: str) -> None:
        """Given up (logged by the outbox): never send it again."""
        query = (
            update(slack_outbox).where(slack_outbox.c.id == post_id).values(status="failed", last_error=error)
        )
        async with self._engine.begin() as conn:
            await conn.execute(query)

    async def pending(self) -> list[OutboxRow]:
        """Posts not yet sent, oldest first, with the ts of their root when it was sent meanwhile."""
        roots = slack_outbox.alias("roots")
        query = (
            select(slack_outbox, roots.c.ts.label("root_ts"), roots.c.status.label("root_status"))
            .select_from(slack_outbox.outerjoin(roots, roots.c.id == slack_outbox.c.root_id))
            .where(slack_outbox.c.status == "pending", slack_outbox.c.kind == "post", self._mine())
            .order_by(slack_outbox.c.seq)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return self._rows(rows)

    def _mine(self) -> ColumnElement[bool]:
        """This process's posts (and those saved before owners were recorded), never a live peer's."""
        if self._owner is None:
            return true()
        return or_(slack_outbox.c.owner == self._owner, slack_outbox.c.owner.is_(None))

    async def take_over(self, owners: Sequence[str]) -> list[OutboxRow]:
        """Make the unsent posts of dead executors this one's; they are returned to be sent."""
        if not owners:
            return []
        theirs = (
            slack_outbox.c.owner.in_(list(owners)),
            slack_outbox.c.status == "pending",
            slack_outbox.c.kind == "post",
        )
        async with self._engine.begin() as conn:
            ids = set((await conn.execute(select(slack_outbox.c.id).where(*theirs))).scalars())
            if ids:
                await conn.execute(
                    update(slack_outbox).where(slack_outbox.c.id.in_(ids)).values(owner=self._owner)
                )
        return [row for row in await self.pending() if row.id in ids] if ids else []

    @staticmethod
    def _rows(rows: Sequence[Row[Any]]) -> list[OutboxRow]:
        return [
            OutboxRow(
                id=r.id,
                seq=r.seq,
                channel=r.channel,
                kwargs=json.loads(r.kwargs),
                root_id=None if r.thread_ts or r.root_ts else r.root_id,
                thread_ts=r.thread_ts or r.root_ts,
                priority=r.priority,
                run_id=r.run_id,
                status="failed" if r.root_id and r.root_status == "failed" and not r.thread_ts else r.status,
                attempts=r.attempts,
                ts=r.ts,
            )
            for r in rows
        ]

    async def save_update(self, state: PendingUpdate) -> None:
        """The newest wanted state of one message (replaces an unsent older one)."""
        values = {
            "kwargs": json.dumps({"text": state.text, "blocks": state.blocks}),
            "ts": state.ts,
            "root_id": state.marker,
            "seq": state.version,
            "status": "pending",
        }
        async with self._engine.begin() as conn:
            changed = await conn.execute(
                update(slack_outbox).where(slack_outbox.c.id == state.id).values(**values)
            )
            if changed.rowcount == 0:
                now = time.time()
                row = {"id": state.id, "kind": "update", "channel": state.channel, "priority": 0}
                await conn.execute(
                    insert(slack_outbox).values(
                        **row, **values, attempts=0, next_attempt_at=now, created_at=now
                    )
                )

    async def update_sent(self, ids: list[str], version: int) -> None:
        """The message shows state `version` (or newer): those rows need no resend."""
        query = (
            update(slack_outbox)
            .where(slack_outbox.c.id.in_(ids), slack_outbox.c.seq <= version)
            .values(status="sent")
        )
        async with self._engine.begin() as conn:
            await conn.execute(query)

    async def pending_updates(self) -> list[PendingUpdate]:
        """Wanted message states not yet shown, oldest first (with their post's ts once it was sent)."""
        posts = slack_outbox.alias("posts")
        query = (
            select(slack_outbox, posts.c.ts.label("post_ts"))
            .select_from(slack_outbox.outerjoin(posts, posts.c.id == slack_outbox.c.root_id))
            .where(slack_outbox.c.status == "pending", slack_outbox.c.kind == "update")
            .order_by(slack_outbox.c.seq)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        out: list[PendingUpdate] = []
        for r in rows:
            state = json.loads(r.kwargs)
            ts = r.ts or r.post_ts
            out.append(
                PendingUpdate(
                    id=r.id,
                    channel=r.channel,
                    ts=ts,
                    marker=None if ts else r.root_id,
                    text=state["text"],
                    blocks=state["blocks"],
                    version=r.seq,
                )
            )
        return out

    async def last_seq(self) -> int:
        """The highest sequence number used so far (0 for an empty table)."""
        async with self._engine.connect() as conn:
            query = select(func.max(slack_outbox.c.seq)).where(slack_outbox.c.kind == "post")
            value = (await conn.execute(query)).scalar_one_or_none()
        return int(value or 0)

    async def first_posts(
        self, run_ids: Sequence[str], *, priority: int | None = None
    ) -> dict[str, OutboxRow]:
        """Each of these runs' first saved post (its status message; of `priority`: e.g. its progress
        message), in one query; runs without one, or whose first one failed, are left out."""
        query = select(slack_outbox).where(
            slack_outbox.c.run_id.in_(list(run_ids)), slack_outbox.c.kind == "post"
        )
        if priority is not None:
            query = query.where(slack_outbox.c.priority == priority)
        query = query.order_by(slack_outbox.c.seq)
        firsts: dict[str, Any] = {}
        async with self._engine.connect() as conn:
            for row in (await conn.execute(query)).all():
                firsts.setdefault(row.run_id, row)
        return {run_id: _row(row) for run_id, row in firsts.items() if row.status != "failed"}

    async def rows(self) -> list[OutboxRow]:
        """Every row, for tests and diagnostics."""
        async with self._engine.connect() as conn:
            query = select(slack_outbox).where(slack_outbox.c.kind == "post").order_by(slack_outbox.c.seq)
            rows = (await conn.execute(query)).all()
        return [_row(r) for r in rows]
