"""Per-provider limits held by every worker together: leased permits in the bot's database.

Each limited provider has rows in `provider_permits`, one per permit, free when its `lease_until`
(the database's clock) has passed:

- a rate limit of R per period is R `rate` rows; a request claims the one free longest and holds
  it for the period plus a margin (`orchestrator.llm.margin`: the request reaches the provider a
  little after its claim), so no window of the period admits more than R. A rate permit is never
  given back early: its lease is its place in the window.
- a concurrency limit of C is C `slot` rows; a call holds one for its request, its lease renewed
  while it runs (one UPDATE per process, for all its slots, every quarter lease) and cleared when
  it ends. A worker that dies (`kill -9`, a lost machine) stops renewing: its slots are free again
  within `lease` seconds, not after the janitor's `dead_after`. One that stalled past its lease
  and lost a slot it still uses takes the next one that frees for it (`_renew_once`).

A claim is one short transaction: a conditional UPDATE of a free row (`lease_until` still past
when it is written, so two processes never take the same one; PostgreSQL skips rows another
claim has locked), both kinds together or neither. Nothing is enqueued and no workflow runs.
A process that finds none free reserves the provider's rows for a few polls (`wanted_by`): the
next one freed is its, not taken back by the process that freed it, so no worker starves.
A call that finds none free waits until the earliest lease ends (a rate row) or the next poll
(a slot: another process may release it any moment), at most `within`, and fails like a provider
timeout, at once when the rate window will not open in time. A database that cannot be reached
is retried until then too: a call is never let through unlimited.

In front of the rows sits this process's own limiter (`orchestrator.LocalLimits`, the same
limits): this process never exceeds a limit alone, its callers queue in order in memory, and only
the head of each provider's queue asks the database. A slot released here goes to the next local
caller at once; one released elsewhere is seen at the next poll (`MASSGEN_PROVIDER_POLL`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.dml import ReturningUpdate
from sqlalchemy.sql.elements import ColumnElement

from bot.engine.tables import database_now, provider_permits
from bot.settings import ProviderLimit, call_limits
from orchestrator import LocalLimits
from orchestrator.llm import margin

log = logging.getLogger(__name__)

RATE, SLOT = "rate", "slot"
LEASE = 5.0  # seconds a dead worker's concurrency slot stays taken, at most
RETRY = 1.0  # seconds between tries while the database cannot be reached, at most


@dataclass(eq=False, slots=True)
class _Permit:
    """A concurrency slot held by one call here; `slot` changes if it is lost and another is taken."""

    provider: str
    slot: int
    lost: bool = False  # another process took `slot` (this one stalled past its lease); none taken yet


@dataclass(frozen=True, slots=True)
class _Claim:
    """A claim's outcome: the slot taken (None for a rate limit alone), or how long until one may free."""

    taken: bool
    slot: int | None = None
    retry_in: float = 0.0
    known: bool = False  # `retry_in` is when a rate permit frees for sure (not a poll)


class ProviderLimits:
    """The engine's `orchestrator.ports.CallAdmission`: a leased permit per request, from the database."""

    def __init__(
        self,
        limits: Mapping[str, ProviderLimit],
        database: AsyncEngine,
        *,
        poll: float,
        holder: str = "local",
        lease: float = LEASE,
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        self.limits = dict(limits)
        self.database = database
        self.poll = poll
        self.lease = lease
        # Unique per process: a restarted worker (same executor id) does not renew the dead one's slots.
        self.holder = f"{holder[:120]}:{uuid.uuid4().hex[:16]}"
        # Called with (provider, seconds waited) for each admitted request (a metric).
        self.observe = observe
        self.local = LocalLimits(call_limits(self.limits))
        self._heads: dict[str, asyncio.Lock] = {}  # per provider: the one local caller asking the database
        self._held: set[_Permit] = set()  # slots held here, renewed while any is
        self._wanting: set[tuple[str, str]] = set()  # (provider, kind) whose rows this process reserved
        self._renewing: asyncio.Task[None] | None = None

    async def register(self, *, update: bool) -> None:
        """Make each limited provider's rows (every process that may call models).

        `update`: this process's sizes become the fleet's (workers: rows past a limit go); a front
        end only adds rows to a provider that has none.
        """
        async with self.database.begin() as conn:
            for name, limit in self.limits.items():
                rate = limit.requests if limit.period is not None else None
                for kind, size in ((RATE, rate), (SLOT, limit.concurrent)):
                    if size is not None:
                        await self._size(conn, name, kind, size, update=update)

    async def _size(
        self, conn: AsyncConnection, provider: str, kind: str, size: int, *, update: bool
    ) -> None:
        t = provider_permits
        mine = (t.c.provider == provider, t.c.kind == kind)
        existing = set((await conn.scalars(select(t.c.slot).where(*mine))).all())
        if existing and not update:
            return
        if update:
            await conn.execute(delete(t).where(*mine, t.c.slot >= size))
        missing = [{"provider": provider, "kind": kind, "slot": s, "lease_until": 0.0} for s in range(size)]
        missing = [row for row in missing if row["slot"] not in existing]
        if missing:  # another process registering at once may have added some: theirs stand
            dialect = postgresql if self.database.dialect.name == "postgresql" else sqlite
            await conn.execute(dialect.insert(t).on_conflict_do_nothing(), missing)

    @contextlib.asynccontextmanager
    async def admit(self, provider: str, *, within: float) -> AsyncIterator[None]:
        """Wait (at most `within` s) for this process's limiter, then the fleet's permit; hold both."""
        limit = self.limits.get(provider)
        if limit is None:  # not limited
            yield
            return
        loop = asyncio.get_running_loop()
        begun = loop.time()
        end = begun + within
        async with self.local.admit(provider, within=within):
            permit = await self._claim(provider, limit, end)
            if self.observe is not None:
                self.observe(provider, loop.time() - begun)
            try:
                yield
            finally:
                if permit is not None:  # before the local slot: the next caller here finds it free
                    await asyncio.shield(self._release(permit))

    async def _claim(self, provider: str, limit: ProviderLimit, end: float) -> _Permit | None:
        """The provider's permits, claimed by `end` (loop time); the slot taken, if any."""
        loop = asyncio.get_running_loop()
        head = self._heads.setdefault(provider, asyncio.Lock())
        async with asyncio.timeout_at(end):
            await head.acquire()
        try:
            failures = 0
            while True:
                try:
                    claim = await self._try(provider, limit)
                    failures = 0
                except (SQLAlchemyError, OSError) as exc:
                    failures += 1
                    log.warning("%s: claiming a permit failed: %s: %s", provider, type(exc).__name__, exc)
                    claim = _Claim(taken=False, retry_in=min(RETRY, self.poll * 2**failures))
                if claim.taken:
                    return None if claim.slot is None else self._hold(provider, claim.slot)
                left = end - loop.time()
                if claim.known and claim.retry_in > left:  # say so now, not at the deadline
                    raise TimeoutError(f"{provider}: its window is full for {claim.retry_in:.3g} s more")
                if left <= 0:
                    raise TimeoutError(f"{provider}: no permit free in time")
                await asyncio.sleep(min(claim.retry_in, left))
        finally:
            head.release()

    async def _try(self, provider: str, limit: ProviderLimit) -> _Claim:
        """One transaction: the slot and the rate permit both, or neither; on a miss, a reservation."""
        claim, missed = await self._claim_once(provider, limit)
        if missed is not None:  # first in line among the processes: the next free row is ours
            await self._want(provider, missed, claim.retry_in + 4 * self.poll)
        elif any(key[0] == provider for key in self._wanting):
            await self._unwant(provider)
        return claim

    async def _claim_once(self, provider: str, limit: ProviderLimit) -> tuple[_Claim, str | None]:
        slot: int | None = None
        async with self.database.connect() as conn, conn.begin() as transaction:
            if limit.concurrent is not None:
                slot = await conn.scalar(self._take(provider, SLOT, self.lease))
                if slot is None:
                    wait = await self._next_free(conn, provider, SLOT)
                    return _Claim(taken=False, retry_in=min(self.poll, wait)), SLOT
            if limit.requests is not None and limit.period is not None:
                span = limit.period + margin(limit.period)
                if await conn.scalar(self._take(provider, RATE, span)) is None:
                    wait = await self._next_free(conn, provider, RATE)
                    await transaction.rollback()  # the slot is not taken either
                    return _Claim(taken=False, retry_in=wait, known=wait > 0), RATE
        return _Claim(taken=True, slot=slot), None

    def _open(self, now: ColumnElement[float]) -> ColumnElement[bool]:
        """A row no other process has reserved (a reservation lapses when its waiter stops asking)."""
        t = provider_permits
        return or_(t.c.wanted_by.is_(None), t.c.wanted_by == self.holder, t.c.wanted_until <= now)

    def _take(self, provider: str, kind: str, hold: float) -> ReturningUpdate[tuple[int]]:
        """Claim the provider's row of `kind` free longest, for `hold` s: its slot, or no row."""
        t = provider_permits
        now = database_now(self.database, stable=True)
        mine = (t.c.provider == provider, t.c.kind == kind)
        free = select(t.c.slot).where(*mine, t.c.lease_until <= now, self._open(now))
        free = free.order_by(t.c.lease_until).limit(1)
        if self.database.dialect.name == "postgresql":  # not wait for, nor collide with, a concurrent claim
            free = free.with_for_update(skip_locked=True)
        return (
            update(t)
            .where(*mine, t.c.slot == free.scalar_subquery(), t.c.lease_until <= now, self._open(now))
            .values(holder=self.holder, lease_until=now + hold, wanted_by=None, wanted_until=None)
            .returning(t.c.slot)
        )

    async def _want(self, provider: str, kind: str, hold: float) -> None:
        """Reserve the provider's unreserved rows of `kind` for this process, for `hold` s.

        Without it a process whose own callers keep coming takes a slot back the moment it frees
        it, and another process, which sees it free only at its next poll, could wait for ever.
        """
        t = provider_permits
        now = database_now(self.database, stable=True)
        try:
            async with self.database.begin() as conn:
                await conn.execute(
                    update(t)
                    .where(t.c.provider == provider, t.c.kind == kind, self._open(now))
                    .values(wanted_by=self.holder, wanted_until=now + hold)
                )
            self._wanting.add((provider, kind))
        except (SQLAlchemyError, OSError) as exc:
            log.info("%s: reserving a permit failed: %s", provider, exc)

    async def _unwant(self, provider: str) -> None:
        """Drop this process's reservations of the provider's rows (it has what it waited for)."""
        t = provider_permits
        self._wanting = {key for key in self._wanting if key[0] != provider}
        with contextlib.suppress(SQLAlchemyError, OSError):
            async with self.database.begin() as conn:
                await conn.execute(
                    update(t)
                    .where(t.c.provider == provider, t.c.wanted_by == self.holder)
                    .values(wanted_by=None, wanted_until=None)
                )

    async def _next_free(self, conn: AsyncConnection, provider: str, kind: str) -> float:
        """Seconds until the provider's first lease of `kind` ends (the poll if it has no rows)."""
        t = provider_permits
        soonest = func.min(t.c.lease_until) - database_now(self.database, stable=True)
        wait = await conn.scalar(select(soonest).where(t.c.provider == provider, t.c.kind == kind))
        return self.poll if wait is None else max(0.0, float(wait))

    def _hold(self, provider: str, slot: int) -> _Permit:
        permit = _Permit(provider, slot)
        self._held.add(permit)
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.create_task(self._renew(), name="provider-permit-leases")
        return permit

    async def _release(self, permit: _Permit) -> None:
        """Free the slot (if the database is away, its lease ends it within `lease` s).

        Only while this process holds it: a slot lost to another process (see `_renew`) is theirs.
        """
        self._held.discard(permit)
        if permit.lost:
            return
        t = provider_permits
        try:
            async with self.database.begin() as conn:
                await conn.execute(
                    update(t)
                    .where(t.c.provider == permit.provider, t.c.kind == SLOT, t.c.slot == permit.slot)
                    .where(t.c.holder == self.holder)
                    .values(holder=None, lease_until=0.0)
                )
        except (SQLAlchemyError, OSError) as exc:
            log.warning(
                "%s: releasing slot %d failed (%s); its lease ends it", permit.provider, permit.slot, exc
            )

    async def _renew(self) -> None:
        """Extend the leases of every slot held here, while any is (one UPDATE for all)."""
        while self._held:
            await asyncio.sleep(self.lease / 4)
            if not self._held:
                return
            try:
                await self._renew_once()
            except (SQLAlchemyError, OSError) as exc:
                log.warning("renewing provider permits failed: %s: %s", type(exc).__name__, exc)

    async def _renew_once(self) -> None:
        """One renewal; a slot found lost is replaced by a free one if there is one.

        A slot is lost when this process stalled (a pause, a blocked loop) past its lease and
        another took it. Its call is still running, so the fleet exceeds the limit by one until a
        slot is taken here for it: at once if one is free, else at the next renewal after one frees
        (no process can recall a request already sent; the provider sees both).
        """
        t = provider_permits
        async with self.database.begin() as conn:
            rows = await conn.execute(
                update(t)
                .where(t.c.holder == self.holder, t.c.kind == SLOT)
                .values(lease_until=database_now(self.database, stable=True) + self.lease)
                .returning(t.c.provider, t.c.slot)
            )
            kept = {(provider, slot) for provider, slot in rows}
            for permit in [p for p in self._held if p.lost or (p.provider, p.slot) not in kept]:
                slot: int | None = await conn.scalar(self._take(permit.provider, SLOT, self.lease))
                if slot is not None:
                    permit.slot, permit.lost = slot, False
                    log.warning(
                        "%s: a held slot was lost past its lease; slot %d taken for it", permit.provider, slot
                    )
                elif not permit.lost:
                    permit.lost = True
                    log.warning(
                        "%s: a held slot was lost past its lease (this process stalled): the fleet is "
                        "over its concurrency limit by one until a slot frees",
                        permit.provider,
                    )


__all__ = ["LEASE", "ProviderLimits"]
