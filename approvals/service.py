"""ApprovalService: asks, decisions, expiry and audit around the pure `lifecycle.transition`.

Every state change is read → `transition` → compare-and-set in the store; a lost race re-reads
and re-evaluates, so the first decision to reach the database wins and every later one gets a
typed `AlreadyDecided`. Waiters wake at once for decisions made in this process and poll the
store for decisions made elsewhere (the CLI, another bot replica).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta

from approvals.audit import AuditEntry, AuditLog, Outcome, entry_for
from approvals.errors import ApprovalNotFoundError, StoreError
from approvals.events import (
    ApprovalCancelled,
    ApprovalDecided,
    ApprovalEvent,
    ApprovalExpired,
    ApprovalReminder,
    ApprovalRequested,
    DecisionRejected,
)
from approvals.lifecycle import (
    Cancel,
    Expire,
    LifecycleEvent,
    Remind,
    Vote,
    open_request,
    rejection_reason,
    transition,
)
from approvals.models import (
    AlreadyDecided,
    ApprovalRequest,
    Ask,
    Decided,
    DecideResult,
    NotFound,
    Principal,
    QuorumPending,
    Rejection,
    Scope,
)
from approvals.ports import ApprovalStore, Clock, ExpiryTimer, SystemClock

log = logging.getLogger(__name__)

Subscriber = Callable[[ApprovalEvent], Awaitable[None] | None]
# Told about every request that reached a terminal state (approved, denied, expired, cancelled),
# after it is stored: how the engine layer wakes a parked run.
# Every failed compare-and-set means another writer changed the row, and a request admits only
# a bounded number of changes (one vote per approver, one terminal state), so this is never hit
# in practice; it turns a store bug into an error instead of a spin.
_MAX_CAS_ATTEMPTS = 1000


def _new_request_id() -> str:
    """144 random bits; the prefix keeps ids from starting with "-" (argparse would read an option)."""
    return "apr_" + secrets.token_urlsafe(18)


class ApprovalService:
    """The approval lifecycle over a store, an audit log and a clock."""

    def __init__(
        self,
        store: ApprovalStore,
        audit: AuditLog,
        clock: Clock | None = None,
        *,
        poll_interval: float = 0.25,
        new_id: Callable[[], str] = _new_request_id,
        new_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self._store = store
        self._audit = audit
        self._clock: Clock = clock or SystemClock()
        self._poll_interval = poll_interval
        self._new_id = new_id
        self._new_nonce = new_nonce
        self._subscribers: list[Subscriber] = []
        self._wakeups: dict[str, set[asyncio.Event]] = {}
        self._timer: ExpiryTimer | None = None

    @property
    def clock(self) -> Clock:
        """The clock the lifecycle reads (the scheduler reads it too)."""
        return self._clock

    def use_timer(self, timer: ExpiryTimer | None) -> None:
        """Attach the expiry scheduler (or detach it with None)."""
        self._timer = timer

    async def request(self, ask: Ask) -> ApprovalRequest:
        """Open a pending request for an engine `ask`; audited, announced and timed."""
        request = open_request(ask, id=self._new_id(), nonce=self._new_nonce(), now=self._clock.now())
        now = request.created_at
        await self._store.insert(request)
        entry = entry_for(request, "ask", at=now, actor="engine", reason=ask.decision.reason)
        await self._audit.record(entry)
        await self._emit(ApprovalRequested(request=request))
        if self._timer is not None:
            self._timer.schedule(request)
        return request

    async def decide(
        self,
        request_id: str,
        principal: Principal,
        *,
        approve: bool,
        scope: Scope = "once",
        reason: str | None = None,
    ) -> DecideResult:
        """Apply one human decision; first decision wins, everything else changes nothing."""
        vote = Vote(principal=principal, approve=approve, scope=scope, reason=reason)
        after = await self._apply(request_id, vote)
        now = self._clock.now()
        if after is None:
            await self._reject(request_id, None, principal.id, "no such request")
            return NotFound(request_id=request_id)
        if not isinstance(after, ApprovalRequest):
            why = rejection_reason(after)
            await self._reject(request_id, after.request, principal.id, why)
            return after
        if after.status == "expired":
            # The vote arrived after the deadline: the request expires, the vote counts for nothing.
            await self._expired(after)
            await self._reject(request_id, after, principal.id, "arrived after the deadline")
            return AlreadyDecided(request=after)
        if after.status == "pending":
            await self._audit.record(
                entry_for(after, "vote", at=now, actor=principal.id, reason=reason, scope=scope)
            )
            await self._emit(ApprovalDecided(request=after, principal_id=principal.id, final=False))
            return QuorumPending(
                request=after, approvals=len(after.approvals_so_far), needed=after.approvers.quorum
            )
        await self._decided(after, principal.id)
        return Decided(request=after)

    async def wait(self, request_id: str) -> ApprovalRequest:
        """Return the request once it is terminal; an overdue request is expired here (fail closed)."""
        wakeup = asyncio.Event()
        self._wakeups.setdefault(request_id, set()).add(wakeup)
        try:
            while True:
                wakeup.clear()
                current = await self._store.get(request_id)
                if current is None:
                    raise ApprovalNotFoundError(request_id)
                if current.terminal:
                    return current
                if self._clock.now() >= current.expires_at:
                    await self._expire_one(request_id)
                    continue
                # On timeout, poll the store again: another process may have decided.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), self._poll_interval)
        finally:
            waiters = self._wakeups.get(request_id, set())
            waiters.discard(wakeup)
            if not waiters:
                self._wakeups.pop(request_id, None)

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id as stored now, or None."""
        return await self._store.get(request_id)

    async def pending(
        self, *, principal: Principal | None = None, run_id: str | None = None
    ) -> list[ApprovalRequest]:
        """Pending requests, optionally only those `principal` is listed to decide."""
        rows = await self._store.query(status="pending", run_id=run_id)
        if principal is None:
            return rows
        return [r for r in rows if r.approvers.lists(principal)]

    async def cancel_run(self, run_id: str, reason: str = "run cancelled") -> int:
        """Cancel every pending request of `run_id`; returns how many this call cancelled."""
        cancelled = 0
        for request in await self._store.query(status="pending", run_id=run_id):
            after = await self._apply(request.id, Cancel(reason=reason))
            if not isinstance(after, ApprovalRequest):
                continue
            now = self._clock.now()
            await self._audit.record(entry_for(after, "cancelled", at=now, actor="engine", reason=reason))
            await self._finish(after, ApprovalCancelled(request=after))
            cancelled += 1
        return cancelled

    async def expire_due(self) -> list[ApprovalRequest]:
        """Expire every pending request whose deadline has passed; returns those this call expired."""
        due = await self._store.query(status="pending", expires_before=self._clock.now())
        expired = []
        for request in due:
            after = await self._expire_one(request.id)
            if after is not None:
                expired.append(after)
        return expired

    async def remind_due(self, *, within: timedelta = timedelta(minutes=1)) -> list[ApprovalRequest]:
        """Send the one reminder for pending requests expiring within `within`.

        A request whose whole lifetime is shorter than `within` gets none: reminding at the
        moment of asking is noise.
        """
        now = self._clock.now()
        reminded = []
        for request in await self._store.query(status="pending", expires_before=now + within):
            if request.reminded_at is not None or request.expires_at <= now:
                continue
            if request.expires_at - request.created_at <= within:
                continue
            after = await self._apply(request.id, Remind())
            if not isinstance(after, ApprovalRequest):
                continue
            await self._audit.record(entry_for(after, "reminded", at=now, actor="engine"))
            await self._emit(ApprovalReminder(request=after))
            reminded.append(after)
        return reminded

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback` with every event; returns the unsubscribe function."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    async def record_decision(self, entry: AuditEntry) -> None:
        """Audit an allow/deny the engine took without asking anyone."""
        await self._audit.record(entry)

    async def audit_trail(self, *, run_id: str | None = None, limit: int | None = None) -> list[AuditEntry]:
        """The audit entries, oldest first (the last `limit` of them when given)."""
        return await self._audit.query(run_id=run_id, limit=limit)

    async def always_rules(self) -> list[str]:
        """Allow rules persisted by `always` approvals, e.g. `command(make test)`."""
        return await self._store.always_rules()

    async def reject(self, request_id: str, principal_id: str, why: str) -> None:
        """Audit and announce a refused attempt made outside `decide` (e.g. a wrong handshake nonce)."""
        request = await self._store.get(request_id)
        await self._reject(request_id, request, principal_id, why)

    # -- internals -------------------------------------------------------------------------

    async def _apply(self, request_id: str, event: LifecycleEvent) -> ApprovalRequest | Rejection | None:
        """Read, transition and compare-and-set until the write lands or nothing is to change."""
        for _ in range(_MAX_CAS_ATTEMPTS):
            current = await self._store.get(request_id)
            if current is None:
                return None
            after = transition(current, event, self._clock.now())
            if not isinstance(after, ApprovalRequest):
                return after
            if await self._store.replace(after, expected_version=current.version):
                return replace(after, version=current.version + 1)
        raise StoreError(f"compare-and-set on request {request_id!r} never settled")

    async def _expire_one(self, request_id: str) -> ApprovalRequest | None:
        current = await self._store.get(request_id)
        if current is None or current.terminal or self._clock.now() < current.expires_at:
            return None
        after = await self._apply(request_id, Expire())
        if not isinstance(after, ApprovalRequest):
            return None
        await self._expired(after)
        return after

    async def _expired(self, request: ApprovalRequest) -> None:
        at = request.decided_at or self._clock.now()
        await self._audit.record(
            entry_for(request, "expired", at=at, actor="engine", reason=request.decision_reason)
        )
        await self._finish(request, ApprovalExpired(request=request))

    async def _decided(self, request: ApprovalRequest, principal_id: str) -> None:
        at = request.decided_at or self._clock.now()
        outcome: Outcome = "approved" if request.status == "approved" else "denied"
        scope = request.decision_scope if outcome == "approved" else None
        await self._audit.record(
            entry_for(
                request, outcome, at=at, actor=principal_id, reason=request.decision_reason, scope=scope
            )
        )
        if outcome == "approved" and scope == "always":
            await self._store.add_always_rule(
                str(request.action), request_id=request.id, decided_by=principal_id, at=at
            )
        await self._finish(request, ApprovalDecided(request=request, principal_id=principal_id))

    async def _finish(self, request: ApprovalRequest, event: ApprovalEvent) -> None:
        if self._timer is not None:
            self._timer.unschedule(request.id)
        for wakeup in self._wakeups.get(request.id, ()):
            wakeup.set()
        await self._emit(event)

    async def _reject(
        self, request_id: str, request: ApprovalRequest | None, principal_id: str, why: str
    ) -> None:
        at = self._clock.now()
        if request is None:
            entry = AuditEntry(
                at=at,
                run_id="",
                agent_id="",
                actor=principal_id,
                action="",
                outcome="rejected",
                reason=why,
                request_id=request_id,
            )
        else:
            entry = entry_for(request, "rejected", at=at, actor=principal_id, reason=why)
        await self._audit.record(entry)
        await self._emit(
            DecisionRejected(
                request_id=request_id, principal_id=principal_id, why=why, at=at, request=request
            )
        )

    async def _emit(self, event: ApprovalEvent) -> None:
        for callback in list(self._subscribers):
            try:
                result = callback(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                # A broken renderer must not undo or block a decision that is already stored.
                log.exception("approval subscriber failed on %s", event.kind)
