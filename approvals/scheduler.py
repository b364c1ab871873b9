"""Expiry and reminder timers on APScheduler 3 (`AsyncIOScheduler`), rebuilt from the store.

Jobs live in memory only; the database is the source of truth. `start()` first expires every
request that fell due while no process was running, then schedules a job per pending request,
so timers survive restarts without a second persistent job store to keep in sync.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from approvals.models import ApprovalRequest
from approvals.service import ApprovalService

log = logging.getLogger(__name__)


class ExpiryScheduler:
    """Fires `service.expire_due()` at each deadline and `remind_due()` `remind_before` earlier.

    Every `sweep_every` it also sweeps the store for anything due (None turns the sweep off).
    """

    def __init__(
        self,
        service: ApprovalService,
        *,
        remind_before: timedelta = timedelta(minutes=1),
        sweep_every: timedelta | None = timedelta(seconds=30),
    ) -> None:
        self._service = service
        self._remind_before = remind_before
        self._sweep_every = sweep_every
        self._scheduler: AsyncIOScheduler | None = None

    @property
    def running(self) -> bool:
        """True between `start` and `stop`."""
        return self._scheduler is not None

    async def start(self) -> None:
        """Start the scheduler, expire overdue requests and reschedule the rest from the store."""
        if self._scheduler is not None:
            return
        # misfire_grace_time=None: a job that fires late (event loop busy, laptop asleep) still runs;
        # an expiry is never skipped.
        scheduler = AsyncIOScheduler(
            timezone=UTC, job_defaults={"misfire_grace_time": None, "coalesce": True}
        )
        scheduler.start()
        self._scheduler = scheduler
        # Attach before reading the store, so a request created meanwhile is scheduled by request().
        self._service.use_timer(self)
        await self._service.expire_due()
        # A reminder whose time passed while no process ran goes out now, before its deadline.
        await self._service.remind_due(within=self._remind_before)
        for request in await self._service.pending():
            self.schedule(request)
        if self._sweep_every is not None:
            # Safety net: requests another replica created (and then died holding the only timer),
            # or whose job failed because the database was briefly down, still expire.
            scheduler.add_job(
                self._sweep, IntervalTrigger(seconds=self._sweep_every.total_seconds()), id="sweep"
            )

    async def stop(self) -> None:
        """Stop firing; pending requests keep their deadlines in the store for the next start."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is None:
            return
        self._service.use_timer(None)
        scheduler.shutdown(wait=False)
        # AsyncIOScheduler performs the shutdown in a loop callback; let it run before returning.
        await asyncio.sleep(0)

    def schedule(self, request: ApprovalRequest) -> None:
        """Add (or replace) the expiry job, and the reminder job when it is still ahead."""
        if self._scheduler is None or request.terminal:
            return
        self._scheduler.add_job(
            self._expire,
            DateTrigger(run_date=request.expires_at),
            id=f"expire:{request.id}",
            replace_existing=True,
        )
        remind_at = request.expires_at - self._remind_before
        if request.reminded_at is None and remind_at > self._service.clock.now():
            self._scheduler.add_job(
                self._remind,
                DateTrigger(run_date=remind_at),
                id=f"remind:{request.id}",
                replace_existing=True,
            )

    def unschedule(self, request_id: str) -> None:
        """Drop the jobs of a request that reached a terminal state."""
        if self._scheduler is None:
            return
        for job_id in (f"expire:{request_id}", f"remind:{request_id}"):
            if self._scheduler.get_job(job_id) is not None:
                self._scheduler.remove_job(job_id)

    def job_ids(self) -> list[str]:
        """Scheduled job ids (for diagnostics and tests)."""
        if self._scheduler is None:
            return []
        return sorted(job.id for job in self._scheduler.get_jobs() if job.id != "sweep")

    async def _expire(self) -> None:
        # Expire everything due, not just this job's request: a sweep is idempotent and also
        # catches requests whose job was lost.
        try:
            await self._service.expire_due()
        except Exception:
            log.exception("expiry sweep failed")

    async def _sweep(self) -> None:
        await self._expire()
        await self._remind()

    async def _remind(self) -> None:
        try:
            await self._service.remind_due(within=self._remind_before)
        except Exception:
            log.exception("reminder sweep failed")
