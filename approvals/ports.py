"""Ports the approval service needs: a clock, a request store and an expiry timer.

Small `Protocol`s owned by the consumer; `approvals.sql` and `approvals.testing` implement the
store, `approvals.scheduler` the timer. The audit port lives in `approvals.audit`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from approvals.models import ApprovalRequest, Status


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...


class SystemClock:
    """Wall-clock time in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ApprovalStore(Protocol):
    """Requests plus the allow rules that `always` approvals persist."""

    async def insert(self, request: ApprovalRequest) -> None: ...

    async def get(self, request_id: str) -> ApprovalRequest | None: ...

    async def replace(self, request: ApprovalRequest, *, expected_version: int) -> bool:
        """Compare-and-set: write `request` (as version `expected_version + 1`) only if the stored
        row is still at `expected_version`. False means someone else changed it first."""
        ...

    async def query(
        self,
        *,
        status: Status | None = None,
        run_id: str | None = None,
        expires_before: datetime | None = None,
    ) -> list[ApprovalRequest]:
        """Requests matching every given filter, oldest first."""
        ...

    async def add_always_rule(self, rule: str, *, request_id: str, decided_by: str, at: datetime) -> None:
        """Persist an allow rule; adding an existing rule is a no-op."""
        ...

    async def always_rules(self) -> list[str]: ...


class ExpiryTimer(Protocol):
    """Fires the service's expiry and reminder at the right time (APScheduler in production)."""

    def schedule(self, request: ApprovalRequest) -> None: ...

    def unschedule(self, request_id: str) -> None: ...
