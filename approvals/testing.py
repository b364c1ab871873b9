"""Fakes for tests and demos: a frozen clock, an in-memory store and audit log, scratch databases.

These are real implementations of the ports (not mocks): the service cannot tell them apart
from the SQL adapters, which is what lets one test table run against all three.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from approvals.audit import AuditEntry
from approvals.models import ApprovalRequest, Approvers, Status, offered_scopes
from approvals.permissions import Action, Decision, Risk

EPOCH = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def ask_decision(*, risk: Risk = "medium", always_offerable: bool = False, reason: str = "asked") -> Decision:
    """An engine decision that asks a human."""
    return Decision(
        verdict="ask",
        resolved="ask",
        risk=risk,
        layer="risk",
        reason=reason,
        always_offerable=always_offerable,
    )


def sample_request(**overrides: object) -> ApprovalRequest:
    """A pending request with sensible defaults; override any field by keyword."""
    fields: dict[str, object] = {
        "id": "req-1",
        "run_id": "run-1",
        "agent_id": "agent1",
        "requester_id": "U_REQ",
        "action": Action(kind="command", target="make test"),
        "digest": "d" * 64,
        "risk": "medium",
        "layer": "risk",
        "reason": "asked",
        "rule": None,
        "scopes": offered_scopes(always_offerable=True, risk="medium"),
        "approvers": Approvers(users=frozenset({"U_A", "U_B", "U_REQ"}), groups=frozenset({"S_OPS"})),
        "status": "pending",
        "created_at": EPOCH,
        "expires_at": EPOCH + timedelta(minutes=5),
        "nonce": "nonce-1",
    }
    fields.update(overrides)
    return ApprovalRequest(**fields)  # type: ignore[arg-type]


class FrozenClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        self._now += delta
        return self._now

    def set(self, when: datetime) -> None:
        self._now = when


class InMemoryApprovalStore:
    """`ApprovalStore` in a dict; the lock makes `replace` a true compare-and-set."""

    def __init__(self) -> None:
        self._rows: dict[str, ApprovalRequest] = {}
        self._rules: dict[str, str] = {}
        self._lock = asyncio.Lock()

    async def insert(self, request: ApprovalRequest) -> None:
        async with self._lock:
            if request.id in self._rows:
                raise KeyError(request.id)
            self._rows[request.id] = request

    async def get(self, request_id: str) -> ApprovalRequest | None:
        return self._rows.get(request_id)

    async def replace(self, request: ApprovalRequest, *, expected_version: int) -> bool:
        async with self._lock:
            current = self._rows.get(request.id)
            if current is None or current.version != expected_version:
                return False
            self._rows[request.id] = replace(request, version=expected_version + 1)
            return True

    async def query(
        self,
        *,
        status: Status | None = None,
        run_id: str | None = None,
        expires_before: datetime | None = None,
    ) -> list[ApprovalRequest]:
        rows = [
            r
            for r in self._rows.values()
            if (status is None or r.status == status)
            and (run_id is None or r.run_id == run_id)
            and (expires_before is None or r.expires_at <= expires_before)
        ]
        return sorted(rows, key=lambda r: (r.created_at, r.id))

    async def add_always_rule(self, rule: str, *, request_id: str, decided_by: str, at: datetime) -> None:
        self._rules.setdefault(rule, request_id)

    async def always_rules(self) -> list[str]:
        return sorted(self._rules)


class InMemoryAuditLog:
    """`AuditLog` in a list."""

    def __init__(self) -> None:
        self.entries: list[AuditEntry] = []

    async def record(self, entry: AuditEntry) -> None:
        self.entries.append(entry)

    async def query(self, run_id: str | None = None, limit: int | None = None) -> list[AuditEntry]:
        rows = [e for e in self.entries if run_id is None or e.run_id == run_id]
        return rows[-limit:] if limit else rows


@asynccontextmanager
async def scratch_postgres_database(server_url: str) -> AsyncIterator[str]:
    """A fresh, empty database on `server_url` for one test; dropped afterwards.

    Tests share one throwaway server (and run concurrently with other engineers' tests), so
    each gets its own database instead of fighting over table names.
    """
    from sqlalchemy import text  # only tests that talk to PostgreSQL pay for it
    from sqlalchemy.ext.asyncio import create_async_engine

    from approvals.sql import async_database_url

    name = f"t_{secrets.token_hex(6)}"
    admin = create_async_engine(async_database_url(server_url), isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
        base, _, _ = async_database_url(server_url).rpartition("/")
        yield f"{base}/{name}"
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()
