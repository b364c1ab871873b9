"""Ports the approval service needs: a clock, a request store and an expiry timer.

Small `Protocol`s owned by the consumer; `approvals.sql` and `approvals.testing` implement the
store, `approvals.scheduler` the timer. The audit port lives in `approvals.audit`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from approvals.models import ApprovalRequest, Status


class Clock(Protocol):
    """The lifecycle's source of time (`SystemClock` in production)."""

    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...


class SystemClock:
    """Wall-clock time in UTC."""

    def now(self) -> datetime:
        """The current time in UTC (Clock.now)."""
        return datetime.now(UTC)


class ApprovalStore(Protocol):
    """Requests plus the allow rules that `always` approvals persist."""

    async def insert(self, request: ApprovalRequest) -> None:
        """Persist a new request."""
        ...

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id, or None."""
        ...

    async def replace(self, request: ApprovalRequest, *, expected_version: int) -> bool:
        """Compare-and-set: write `request` only if the stored row is still at `expected_version`.

        The row becomes version `expected_version + 1`. False means someone else changed it first.
        """
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

    async def always_rules(self) -> list[str]:
        """Every persisted allow rule."""
        ...


class ExpiryTimer(Protocol):
    """Fires the service's expiry and reminder at the right time (APScheduler in production)."""

    def schedule(self, request: ApprovalRequest) -> None:
        """Arrange the request's expiry (and its reminder) at their times, replacing earlier jobs."""
        ...

    def unschedule(self, request_id: str) -> None:
        """Drop the request's jobs (it reached a terminal state)."""
        ...
