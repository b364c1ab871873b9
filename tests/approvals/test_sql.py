"""The SQL store and audit log on SQLite and PostgreSQL (and the in-memory fake, same contract)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import MappingProxyType

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals.audit import AuditEntry
from approvals.errors import ApprovalMisuseError, StoreError
from approvals.models import ApprovalRequest, Approvers, ConversationRef
from approvals.ports import ApprovalStore
from approvals.sql import (
    SqlApprovalStore,
    SqlAuditLog,
    async_database_url,
    create_schema,
    make_engine,
)
from approvals.testing import EPOCH, InMemoryApprovalStore, sample_request


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(database_url)
    await create_schema(engine)
    yield engine
    await engine.dispose()


@pytest.fixture(params=["memory", "sql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ApprovalStore]:
    if request.param == "memory":
        yield InMemoryApprovalStore()
        return
    engine = make_engine(f"sqlite:///{tmp_path}/contract.db")
    await create_schema(engine)
    yield SqlApprovalStore(engine)
    await engine.dispose()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///x.db", "sqlite+aiosqlite:///x.db"),
        ("sqlite:////abs/x.db", "sqlite+aiosqlite:////abs/x.db"),
        ("sqlite+aiosqlite:///x.db", "sqlite+aiosqlite:///x.db"),
        ("postgresql://u:p@h:5432/db", "postgresql+asyncpg://u:p@h:5432/db"),
        ("postgres://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg://u@h/db"),
    ],
)
def test_async_database_url(url: str, expected: str) -> None:
    assert async_database_url(url) == expected


@pytest.mark.parametrize("url", ["mysql://u@h/db", "postgresql+psycopg2://u@h/db", "not a url"])
def test_unsupported_database_urls_are_refused(url: str) -> None:
    with pytest.raises(ApprovalMisuseError):
        async_database_url(url)


async def test_round_trip_keeps_every_field(engine: AsyncEngine) -> None:
    store = SqlApprovalStore(engine)
    request = sample_request(
        requester_id=None,
        rule="ask: command(git push*)",
        approvers=Approvers(users=frozenset({"U_A", "U_B"}), groups=frozenset({"S1"}), quorum=2),
        context=MappingProxyType({"input": "make test", "files": "a.py"}),
        conversation=ConversationRef(surface="slack", channel="C1", thread="1.2"),
        expires_at=EPOCH.astimezone(timezone(timedelta(hours=5))) + timedelta(minutes=5),
    )
    await store.insert(request)
    loaded = await store.get(request.id)
    assert loaded == request
    assert loaded is not None
    assert loaded.expires_at.tzinfo is not None
    assert await store.get("missing") is None


async def test_compare_and_set(store: ApprovalStore) -> None:
    request = sample_request()
    await store.insert(request)
    approved = replace(request, status="approved", decided_by="U_A", decided_at=EPOCH)
    assert await store.replace(approved, expected_version=0)
    assert not await store.replace(replace(request, status="denied"), expected_version=0)
    loaded = await store.get(request.id)
    assert loaded is not None
    assert (loaded.status, loaded.version) == ("approved", 1)
    assert not await store.replace(replace(request, id="other"), expected_version=0)


async def test_query_filters(store: ApprovalStore) -> None:
    rows = [
        sample_request(id="a", run_id="r1", created_at=EPOCH, expires_at=EPOCH + timedelta(minutes=1)),
        sample_request(
            id="b",
            run_id="r1",
            created_at=EPOCH + timedelta(seconds=1),
            expires_at=EPOCH + timedelta(minutes=9),
        ),
        sample_request(id="c", run_id="r2", created_at=EPOCH + timedelta(seconds=2), status="denied"),
    ]
    for row in rows:
        await store.insert(row)

    def ids(found: list[ApprovalRequest]) -> list[str]:
        return [r.id for r in found]

    assert ids(await store.query()) == ["a", "b", "c"]
    assert ids(await store.query(status="pending")) == ["a", "b"]
    assert ids(await store.query(run_id="r2")) == ["c"]
    assert ids(await store.query(status="pending", expires_before=EPOCH + timedelta(minutes=1))) == ["a"]
    assert ids(await store.query(status="pending", expires_before=EPOCH)) == []


async def test_always_rules_are_idempotent(store: ApprovalStore) -> None:
    for _ in range(2):
        await store.add_always_rule("command(make test)", request_id="r", decided_by="U_A", at=EPOCH)
    await store.add_always_rule("read(README.md)", request_id="s", decided_by="U_B", at=EPOCH)
    assert await store.always_rules() == ["command(make test)", "read(README.md)"]


async def test_audit_log_appends_and_filters(engine: AsyncEngine) -> None:
    audit = SqlAuditLog(engine)
    entries = [
        AuditEntry(
            at=EPOCH + timedelta(seconds=i),
            run_id=f"r{i % 2}",
            agent_id="a",
            actor="engine",
            action=f"command(step {i})",
            outcome="allow",
            layer="rule",
            risk="low",
            reason=None,
        )
        for i in range(5)
    ]
    for entry in entries:
        await audit.record(entry)
    assert await audit.query() == entries
    assert await audit.query(run_id="r1") == [entries[1], entries[3]]
    assert await audit.query(limit=2) == entries[-2:]


@pytest.mark.parametrize("statement", ["UPDATE approval_audit SET actor = 'x'", "DELETE FROM approval_audit"])
async def test_audit_table_refuses_rewrites(engine: AsyncEngine, statement: str) -> None:
    audit = SqlAuditLog(engine)
    entry = AuditEntry(
        at=EPOCH, run_id="r", agent_id="a", actor="U_A", action="command(x)", outcome="approved"
    )
    await audit.record(entry)
    with pytest.raises(DBAPIError, match="append-only"):
        async with engine.begin() as conn:
            await conn.execute(text(statement))
    assert await audit.query() == [entry]


async def test_schema_creation_is_idempotent(engine: AsyncEngine) -> None:
    await create_schema(engine)
    await create_schema(engine)
    store = SqlApprovalStore(engine)
    await store.insert(sample_request())
    assert await store.get("req-1") is not None


async def test_corrupt_rows_raise_instead_of_guessing(engine: AsyncEngine) -> None:
    store = SqlApprovalStore(engine)
    await store.insert(sample_request())
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE approval_requests SET status = 'maybe'"))
    with pytest.raises(StoreError, match="corrupt"):
        await store.get("req-1")


async def test_naive_datetimes_are_refused(engine: AsyncEngine) -> None:
    store = SqlApprovalStore(engine)
    with pytest.raises(StoreError, match="naive"):
        await store.insert(sample_request(created_at=datetime(2026, 1, 1)))  # noqa: DTZ001 - on purpose
    assert await store.query() == []


def test_sqlite_connections_use_wal_and_busy_timeout(tmp_path: Path) -> None:
    import asyncio

    async def pragmas() -> tuple[str, int]:
        engine = make_engine(f"sqlite:///{tmp_path}/wal.db")
        async with engine.connect() as conn:
            mode = (await conn.execute(text("PRAGMA journal_mode"))).scalar_one()
            timeout = (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one()
        await engine.dispose()
        return mode, timeout

    assert asyncio.run(pragmas()) == ("wal", 10_000)


@pytest.mark.parametrize("when", [EPOCH, EPOCH.astimezone(timezone(timedelta(hours=-7)))])
async def test_datetimes_come_back_in_utc(engine: AsyncEngine, when: datetime) -> None:
    store = SqlApprovalStore(engine)
    await store.insert(sample_request(created_at=when))
    loaded = await store.get("req-1")
    assert loaded is not None
    assert loaded.created_at == when
    assert loaded.created_at.utcoffset() == UTC.utcoffset(None)


async def test_concurrent_schema_creation_is_safe(database_url: str) -> None:
    engines = [make_engine(database_url) for _ in range(4)]
    try:
        await asyncio.gather(*(create_schema(e) for e in engines))
        store = SqlApprovalStore(engines[0])
        await store.insert(sample_request())
        assert await SqlApprovalStore(engines[3]).get("req-1") is not None
    finally:
        for engine in engines:
            await engine.dispose()
