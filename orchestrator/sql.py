"""`RunStore` on SQLAlchemy async (SQLite or PostgreSQL): a `runs` summary row plus the `run_events` log.

Events are stored as their stable JSON (`orchestrator.events.to_json`) keyed by (run_id, seq), so a
stored run can always be folded back into its coordination state (`orchestrator.run.rebuild_state`).
The store takes an engine and never owns it: the composition root makes one (`approvals.make_engine`
sets WAL and a busy timeout on SQLite) and shares it; the tables are this package's own metadata.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table, Text, insert, select, update
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import ConversationRef
from orchestrator.errors import RunFenced, RunStoreError
from orchestrator.events import RunEvent, from_json, to_json
from orchestrator.lease import hold_run
from orchestrator.store import RunQuery, RunStatus, RunSummary, summarise

if TYPE_CHECKING:
    from orchestrator.ports import RunLease

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("task", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("requester", String(255)),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float),
    Column("winner", String(64)),
    Column("salvage", String(64)),
    Column("cost_usd", Float, nullable=False, default=0.0),
    Column("input_tokens", Integer, nullable=False, default=0),
    Column("output_tokens", Integer, nullable=False, default=0),
    Column("last_seq", Integer, nullable=False, default=0),
    # Added by issue 8 (the run store is the one truth about a run); older databases get them on start-up.
    Column("team", String(128)),
    Column("final_answer", Text),
    Column("conversation_surface", String(32)),
    Column("conversation_channel", String(255)),
    Column("conversation_thread", String(255)),
    Index("ix_runs_started_at", "started_at"),
    Index("ix_runs_channel", "conversation_channel", "started_at"),
    Index("ix_runs_requester", "requester", "started_at"),
)
_ADDED_COLUMNS = (
    ("team", "VARCHAR(128)"),
    ("final_answer", "TEXT"),
    ("conversation_surface", "VARCHAR(32)"),
    ("conversation_channel", "VARCHAR(255)"),
    ("conversation_thread", "VARCHAR(255)"),
)
_ADDED_INDEXES = ("ix_runs_channel", "ix_runs_requester")

run_events = Table(
    "run_events",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("at", Float, nullable=False),
    Column("data", Text, nullable=False),
)

# What the migrations (`bot/migrations`) keep in step with: the run store's tables.
run_metadata = metadata

_SUMMARY_KINDS = frozenset({"started", "usage", "finished", "failed", "cancelled"})


async def create_run_schema(engine: AsyncEngine) -> None:
    """Create the run tables unless they exist; safe on every start-up."""
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all, checkfirst=True)
        await conn.run_sync(_add_missing_columns)


def _add_missing_columns(conn: Connection) -> None:
    """Bring a `runs` table created before issue 8 up to date (nullable columns, two indexes)."""
    present = {c["name"] for c in sa_inspect(conn).get_columns("runs")}
    for column, sql_type in _ADDED_COLUMNS:
        if column not in present:
            conn.exec_driver_sql(f"ALTER TABLE runs ADD COLUMN {column} {sql_type}")
    if _ADDED_COLUMNS[0][0] not in present:
        for index in runs.indexes:
            if index.name in _ADDED_INDEXES:
                index.create(conn, checkfirst=True)


# (the open transaction, the events it stores) -> what to do once it commits, if anything.
ImpliedWrites = Callable[[AsyncConnection, tuple[RunEvent, ...]], Awaitable[Callable[[], None] | None]]


class SqlRunStore:
    """The run store on an async engine it does not own; `SqlRunStore.create(engine)` adds the schema."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        # What a batch of events implies beside them (the bot: a run's end and its final answer's
        # posts), written in the same transaction; what it returns is called once that commits.
        self.implied: ImpliedWrites | None = None

    @classmethod
    async def create(cls, engine: AsyncEngine) -> SqlRunStore:
        """A store on `engine`, with the run tables created unless they exist."""
        await create_run_schema(engine)
        return cls(engine)

    async def append(self, *events: RunEvent) -> None:
        """Insert the events and, for summary-changing ones, update the run row, in one transaction.

        Several at once when the run emitted them faster than one transaction each could take:
        one round trip to the database instead of one per event.
        """
        if not events:
            return
        rows = [
            {"run_id": e.run_id, "seq": e.seq, "kind": e.kind, "at": e.at, "data": to_json(e)} for e in events
        ]
        first, last = events[0], events[-1]
        seqs = f"{first.seq}" if len(events) == 1 else f"{first.seq}..{last.seq}"
        committed = None
        try:
            async with self.engine.begin() as conn:
                await conn.execute(insert(run_events), rows)
                for event in events:
                    if event.kind in _SUMMARY_KINDS:
                        await self._summarise(conn, event)
                if self.implied is not None:
                    committed = await self.implied(conn, events)
        except IntegrityError as exc:
            await self._already_stored(events, exc)
        except SQLAlchemyError as exc:
            raise RunStoreError(f"run {first.run_id}: cannot store events {seqs}: {exc}") from exc
        if committed is not None:
            committed()

    async def _already_stored(self, events: tuple[RunEvent, ...], exc: IntegrityError) -> None:
        """A write that collided: the same events (a retry after a lost commit ack) are fine."""
        first = events[0]
        query = select(run_events.c.seq, run_events.c.data).where(
            run_events.c.run_id == first.run_id, run_events.c.seq.in_([e.seq for e in events])
        )
        try:
            async with self.engine.connect() as conn:
                stored = {row.seq: row.data for row in (await conn.execute(query)).all()}
        except SQLAlchemyError as again:
            raise RunStoreError(f"run {first.run_id}: cannot read back seq {first.seq}: {again}") from exc
        for event in events:
            data = stored.get(event.seq)
            if data is not None and from_json(data) != event:
                raise RunFenced(first.run_id, event.seq) from exc
        if len(stored) == len(events):
            return
        if not stored:  # none of them is there: what failed is a write they imply (`implied`)
            detail = f"run {first.run_id}: cannot store events from seq {first.seq}: {exc}"
            raise RunStoreError(detail) from exc
        raise RunStoreError(f"run {first.run_id}: event seq {first.seq} already stored") from exc

    async def _summarise(self, conn: AsyncConnection, event: RunEvent) -> None:
        current = await self._get(conn, event.run_id)
        summary = summarise(current, event)
        if summary is None:
            raise RunStoreError(f"run {event.run_id}: {event.kind} before `started`")
        values = _row(summary)
        if current is None:
            await conn.execute(insert(runs).values(**values))
        else:
            await conn.execute(update(runs).where(runs.c.run_id == event.run_id).values(**values))

    async def events(self, run_id: str) -> list[RunEvent]:
        """The run's events in seq order."""
        query = select(run_events.c.data).where(run_events.c.run_id == run_id).order_by(run_events.c.seq)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).scalars().all()
        return [from_json(data) for data in rows]

    async def runs(self, limit: int = 50, *, status: RunStatus | None = None) -> list[RunSummary]:
        """Most recently started first."""
        return await self.find(RunQuery(limit=limit, status=status))

    async def find(self, query: RunQuery) -> list[RunSummary]:
        """The runs matching every filter of `query`, most recently started first."""
        statement = select(runs).order_by(runs.c.started_at.desc()).limit(query.limit)
        filters = {
            runs.c.status: query.status,
            runs.c.requester: query.requester,
            runs.c.conversation_surface: query.surface,
            runs.c.conversation_channel: query.channel,
        }
        for column, value in filters.items():
            if value is not None:
                statement = statement.where(column == value)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(statement)).mappings().all()
        return [_summary(row) for row in rows]

    async def get(self, run_id: str) -> RunSummary | None:
        """One run's summary, or None."""
        async with self.engine.connect() as conn:
            return await self._get(conn, run_id)

    @asynccontextmanager
    async def lease(self, run_id: str) -> AsyncIterator[RunLease]:
        """Hold the run against every other process on this database (`orchestrator.lease`)."""
        async with hold_run(self.engine, run_id) as lease:
            yield lease

    @staticmethod
    async def _get(conn: AsyncConnection, run_id: str) -> RunSummary | None:
        row = (await conn.execute(select(runs).where(runs.c.run_id == run_id))).mappings().first()
        return _summary(row) if row is not None else None


def _row(summary: RunSummary) -> dict[str, Any]:
    values = {f.name: getattr(summary, f.name) for f in fields(summary) if f.name != "conversation"}
    where = summary.conversation
    values["conversation_surface"] = where.surface if where is not None else None
    values["conversation_channel"] = where.channel if where is not None else None
    values["conversation_thread"] = where.thread if where is not None else None
    return values


def _summary(row: Any) -> RunSummary:
    values: dict[str, Any] = {c.name: row[c.name] for c in runs.columns if not c.name.startswith("conv")}
    if row["conversation_surface"] is not None:
        values["conversation"] = ConversationRef(
            surface=row["conversation_surface"],
            channel=row["conversation_channel"] or "",
            thread=row["conversation_thread"],
        )
    return RunSummary(**values)
