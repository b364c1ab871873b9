"""SQLAlchemy 2 async adapters: the approval store and the audit log, on SQLite or PostgreSQL.

SQLite is the default (WAL so readers never block the writer, `busy_timeout` so concurrent
writers queue instead of failing). The first decision wins through a compare-and-set on the
row's `version`; the audit table refuses UPDATE and DELETE through triggers on both databases.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import (
    Column,
    DateTime,
    Dialect,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    event,
    insert,
    select,
    text,
    update,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.types import TypeDecorator

from approvals.audit import AuditEntry
from approvals.errors import ApprovalMisuseError, StoreError
from approvals.models import ApprovalRequest, Status
from approvals.permissions import Action

SQLITE_BUSY_TIMEOUT_MS = 10_000
_SCHEMA_LOCK_KEY = 0x6D617373_67656E  # arbitrary, fixed: "massgen"


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware in Python, UTC in the database (SQLite keeps no zone, so we strip and restore)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """To the database: refuse a naive datetime, store UTC (without a zone on SQLite)."""
        if value is None:
            return None
        _require_aware(value)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """From the database: an aware UTC datetime."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData()

requests_table = Table(
    "approval_requests",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("run_id", String(200), nullable=False),
    Column("agent_id", String(200), nullable=False),
    Column("requester_id", String(200)),
    Column("action_kind", String(16), nullable=False),
    Column("action_target", Text, nullable=False),
    Column("digest", String(128), nullable=False),
    Column("risk", String(16), nullable=False),
    Column("layer", String(16), nullable=False),
    Column("reason", Text, nullable=False),
    Column("rule", Text),
    Column("scopes", String(32), nullable=False),  # comma-separated, e.g. "once,run"
    Column("approvers", Text, nullable=False),  # JSON
    Column("status", String(16), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("nonce", String(128), nullable=False),
    Column("decided_by", String(200)),
    Column("decided_at", UtcDateTime),
    Column("decision_scope", String(16)),
    Column("decision_reason", Text),
    Column("approvals_so_far", Text, nullable=False),  # JSON list of principal ids
    Column("context", Text, nullable=False),  # JSON object of strings
    Column("reminded_at", UtcDateTime),
    Column("version", Integer, nullable=False),
    # JSON {"surface", "channel", "thread"} or NULL: where the run lives (added after 0001: see below).
    Column("conversation", Text),
    Index("ix_approval_requests_status_expires", "status", "expires_at"),
    Index("ix_approval_requests_run", "run_id"),
)

audit_table = Table(
    "approval_audit",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("at", UtcDateTime, nullable=False),
    Column("run_id", String(200), nullable=False),
    Column("agent_id", String(200), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("action", Text, nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("layer", String(16)),
    Column("risk", String(16)),
    Column("reason", Text),
    Column("request_id", String(64)),
    Column("scope", String(16)),
    Index("ix_approval_audit_run", "run_id", "seq"),
)

rules_table = Table(
    "approval_always_rules",
    metadata,
    Column("rule", String(2000), primary_key=True),
    Column("request_id", String(64), nullable=False),
    Column("decided_by", String(200), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

# What the migrations (`bot/migrations`) keep in step with: every table of this store.
approval_metadata = metadata

# The audit trail is append-only at the database too, so a bug (or a hand-typed SQL statement
# through the app's own credentials) cannot rewrite history.
_APPEND_ONLY: dict[str, tuple[str, ...]] = {
    "sqlite": tuple(
        f"CREATE TRIGGER IF NOT EXISTS approval_audit_no_{op.lower()} BEFORE {op} ON approval_audit "
        "BEGIN SELECT RAISE(ABORT, 'approval_audit is append-only'); END"
        for op in ("UPDATE", "DELETE")
    ),
    "postgresql": (
        "CREATE OR REPLACE FUNCTION approval_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'approval_audit is append-only'; END $$",
        "CREATE TRIGGER approval_audit_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON approval_audit "
        "FOR EACH STATEMENT EXECUTE FUNCTION approval_audit_append_only()",
    ),
}


@event.listens_for(audit_table, "after_create")
def _make_audit_append_only(_table: Table, connection: Connection, **_kw: object) -> None:
    for statement in _APPEND_ONLY.get(connection.dialect.name, ()):
        connection.exec_driver_sql(statement)


_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def async_database_url(url: str) -> str:
    """Map a plain database URL to its async driver; async URLs pass through unchanged."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ApprovalMisuseError(f"not a database URL: {url!r}") from exc
    driver = {
        "sqlite": "sqlite+aiosqlite",
        "postgresql": "postgresql+asyncpg",
        "postgres": "postgresql+asyncpg",
    }
    if parsed.drivername in ("sqlite+aiosqlite", "postgresql+asyncpg"):
        return url
    if parsed.drivername not in driver:
        raise ApprovalMisuseError(f"unsupported database URL scheme {parsed.drivername!r}")
    return parsed.set(drivername=driver[parsed.drivername]).render_as_string(hide_password=False)


POOL_SIZE, POOL_OVERFLOW = 10, 20  # per process on PostgreSQL (SQLAlchemy's default: 5 + 10)


def make_engine(url: str) -> AsyncEngine:
    """An async engine for `url`; SQLite connections get WAL and a busy timeout."""
    async_url = async_database_url(url)
    if make_url(async_url).get_backend_name() != "sqlite":
        return create_async_engine(async_url, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW)
    engine = create_async_engine(async_url)
    event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


_LOCKED_RETRIES = 40  # x 50 ms: two seconds at most


async def create_schema(engine: AsyncEngine) -> None:
    """Create the tables (and the audit triggers) unless they exist; safe to call every start-up.

    Replicas (and the CLI) may start together: on PostgreSQL an advisory lock serialises them;
    on SQLite a loser of the race sees "already exists" and checks again; each such failure
    means another process created a table, so the retries are bounded by the table count.
    """
    attempts = len(metadata.tables) + 1
    locked = 0
    for attempt in range(1, attempts + 1):
        try:
            async with engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY})
                await conn.run_sync(metadata.create_all, checkfirst=True)
                await conn.run_sync(_add_missing_columns)
            return
        except OperationalError as exc:
            # SQLite: a new database's switch to WAL (the first connection's pragma) answers an
            # immediate "locked" while another process opens it too; that is worth a short wait.
            if "database is locked" in str(exc) and locked < _LOCKED_RETRIES:
                locked += 1
                await asyncio.sleep(0.05)
                continue
            if attempt == attempts or "already exists" not in str(exc):
                raise


# Nullable columns added after a table first shipped: (table, column, SQL type). Databases made before
# the migrations (`bot/migrations`) get them here, before they are stamped with the baseline.
_ADDED_COLUMNS = (("approval_requests", "conversation", "TEXT"),)


def _add_missing_columns(conn: Connection) -> None:
    inspector = sa_inspect(conn)
    for table, column, sql_type in _ADDED_COLUMNS:
        if column not in {c["name"] for c in inspector.get_columns(table)}:
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}")


def _require_aware(*values: datetime | None) -> None:
    if any(v is not None and v.utcoffset() is None for v in values):
        raise StoreError("naive datetime given to the approval store; use timezone-aware UTC")


def _request_row(request: ApprovalRequest) -> dict[str, Any]:
    _require_aware(request.created_at, request.expires_at, request.decided_at, request.reminded_at)
    approvers = request.approvers
    return {
        "id": request.id,
        "run_id": request.run_id,
        "agent_id": request.agent_id,
        "requester_id": request.requester_id,
        "action_kind": request.action.kind,
        "action_target": request.action.target,
        "digest": request.digest,
        "risk": request.risk,
        "layer": request.layer,
        "reason": request.reason,
        "rule": request.rule,
        "scopes": ",".join(request.scopes),
        "approvers": json.dumps(
            {
                "users": sorted(approvers.users),
                "groups": sorted(approvers.groups),
                "allow_self_approval": approvers.allow_self_approval,
                "quorum": approvers.quorum,
            }
        ),
        "status": request.status,
        "created_at": request.created_at,
        "expires_at": request.expires_at,
        "nonce": request.nonce,
        "decided_by": request.decided_by,
        "decided_at": request.decided_at,
        "decision_scope": request.decision_scope,
        "decision_reason": request.decision_reason,
        "approvals_so_far": json.dumps(list(request.approvals_so_far)),
        "context": json.dumps(dict(request.context), sort_keys=True),
        "reminded_at": request.reminded_at,
        "version": request.version,
        "conversation": None if request.conversation is None else json.dumps(asdict(request.conversation)),
    }


_REQUEST_ADAPTER: TypeAdapter[ApprovalRequest] = TypeAdapter(ApprovalRequest)


def _request_from_row(row: Any) -> ApprovalRequest:
    """Validate a stored row back into a request; a corrupt row is an error, never a guess."""
    try:
        request = _REQUEST_ADAPTER.validate_python(
            {
                **{key: row[key] for key in _PLAIN_COLUMNS},
                "action": Action(kind=row["action_kind"], target=row["action_target"]),
                "scopes": tuple(s for s in row["scopes"].split(",") if s),
                "approvers": json.loads(row["approvers"]),
                "approvals_so_far": tuple(json.loads(row["approvals_so_far"])),
                "context": json.loads(row["context"]),
                "conversation": None if row["conversation"] is None else json.loads(row["conversation"]),
            }
        )
    except (ValidationError, ValueError, TypeError) as exc:
        raise StoreError(f"approval request {row['id']!r} is corrupt in the store: {exc}") from exc
    return replace(request, context=MappingProxyType(dict(request.context)))


_PLAIN_COLUMNS = tuple(
    c.name
    for c in requests_table.columns
    if c.name
    not in (
        "action_kind",
        "action_target",
        "scopes",
        "approvers",
        "approvals_so_far",
        "context",
        "conversation",
    )
)


class SqlApprovalStore:
    """`ApprovalStore` on a SQLAlchemy async engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def insert(self, request: ApprovalRequest) -> None:
        """Persist a new request (ApprovalStore.insert)."""
        async with self._engine.begin() as conn:
            await conn.execute(insert(requests_table).values(**_request_row(request)))

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id, or None (ApprovalStore.get)."""
        async with self._engine.connect() as conn:
            result = await conn.execute(select(requests_table).where(requests_table.c.id == request_id))
            row = result.mappings().first()
        return None if row is None else _request_from_row(row)

    async def replace(self, request: ApprovalRequest, *, expected_version: int) -> bool:
        """Compare-and-set on the row's `version` (ApprovalStore.replace)."""
        values = _request_row(request)
        values.pop("id")
        values["version"] = expected_version + 1
        statement = (
            update(requests_table)
            .where(requests_table.c.id == request.id, requests_table.c.version == expected_version)
            .values(**values)
        )
        async with self._engine.begin() as conn:
            result = await conn.execute(statement)
        # One row changed means our compare-and-set won; zero means someone else's did.
        return result.rowcount == 1

    async def query(
        self,
        *,
        status: Status | None = None,
        run_id: str | None = None,
        expires_before: datetime | None = None,
    ) -> list[ApprovalRequest]:
        """Requests matching every given filter, oldest first (ApprovalStore.query)."""
        statement = select(requests_table).order_by(requests_table.c.created_at, requests_table.c.id)
        if status is not None:
            statement = statement.where(requests_table.c.status == status)
        if run_id is not None:
            statement = statement.where(requests_table.c.run_id == run_id)
        if expires_before is not None:
            statement = statement.where(requests_table.c.expires_at <= expires_before)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(statement)).mappings().all()
        return [_request_from_row(row) for row in rows]

    async def add_always_rule(self, rule: str, *, request_id: str, decided_by: str, at: datetime) -> None:
        """Persist an allow rule; an existing one is left as it is (ApprovalStore.add_always_rule)."""
        row = {"rule": rule, "request_id": request_id, "decided_by": decided_by, "created_at": at}
        try:
            async with self._engine.begin() as conn:
                await conn.execute(insert(rules_table).values(**row))
        except IntegrityError:
            pass  # the rule already exists: approving it again adds nothing

    async def always_rules(self) -> list[str]:
        """Every persisted allow rule, sorted (ApprovalStore.always_rules)."""
        async with self._engine.connect() as conn:
            rows = await conn.execute(select(rules_table.c.rule).order_by(rules_table.c.rule))
            return [r[0] for r in rows]


class SqlAuditLog:
    """`AuditLog` on a SQLAlchemy async engine; the table itself refuses updates and deletes."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def record(self, entry: AuditEntry) -> None:
        """Append one entry; a naive time is refused (AuditLog.record)."""
        _require_aware(entry.at)
        values = asdict(entry)
        async with self._engine.begin() as conn:
            await conn.execute(insert(audit_table).values(**values))

    async def query(self, run_id: str | None = None, limit: int | None = None) -> list[AuditEntry]:
        """Entries oldest first; with `limit`, the most recent `limit` of them (AuditLog.query)."""
        statement = select(audit_table).order_by(audit_table.c.seq.desc())
        if run_id is not None:
            statement = statement.where(audit_table.c.run_id == run_id)
        if limit is not None:
            statement = statement.limit(limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(statement)).mappings().all()
        return [_entry_from_row(row) for row in reversed(rows)]


_ENTRY_ADAPTER: TypeAdapter[AuditEntry] = TypeAdapter(AuditEntry)


def _entry_from_row(row: Any) -> AuditEntry:
    data = {key: value for key, value in row.items() if key != "seq"}
    try:
        return _ENTRY_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise StoreError(f"audit entry {row['seq']} is corrupt in the store: {exc}") from exc
