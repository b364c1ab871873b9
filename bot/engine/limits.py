"""Per-provider limits as DBOS queues: the model calls of every worker together stay under them.

One queue per limited provider (`provider:<name>`), with the queue's rate `limiter` (requests per
period, counted over every process on the system database) and its `global_concurrency` (calls
in flight fleet-wide). Before each request a caller enqueues a tiny permit workflow and waits
until some process's queue has started it: the queue's limits decide when. For a concurrency
limit the permit holds its slot (it waits for a release message) until the request ends, never
past the call's deadline: a caller that dies leaves a permit that times out. Providers without a
limit are not queued and cost nothing.

The caller learns of the start from the permit itself when the permit runs in its own process
(the embedded default: no database round trip), else from the permit's `started` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from dbos import DBOS, Queue, SetWorkflowID

from bot.settings import ProviderLimit

log = logging.getLogger(__name__)

QUEUE_PREFIX = "provider:"
PERMIT = "massgen.permit"
STARTED = "started"
RELEASE = "release"
T = TypeVar("T")

# Permits this process waits for: permit id -> wakes the waiting call (called on DBOS's loop).
_waiting: dict[str, Callable[[], None]] = {}


def queue_period(period: float) -> float:
    """The queue's period for a provider's: a little longer.

    The queue counts a request when its permit starts, the provider when it arrives, a few
    milliseconds later and not equally so for each: the margin keeps the arrivals under the limit.
    """
    return period + min(0.25, 0.1 * period)


@DBOS.workflow(name=PERMIT)
async def permit_workflow(until: float) -> None:
    """Started when the provider's limits allow one more request; holds a slot until released (or `until`)."""
    wake = _waiting.get(DBOS.workflow_id or "")
    if wake is not None:
        wake()
    await DBOS.set_event_async(STARTED, True)  # for a caller in another process
    hold = until - time.time()
    if hold > 0:
        await DBOS.recv_async(RELEASE, timeout_seconds=hold)


async def _outside(coro: Coroutine[Any, Any, T]) -> T:
    """Run a DBOS call outside any DBOS context.

    A run's tasks inherit the context of the workflow step that resumed the run: a DBOS call made
    there would count as part of that step (or be refused by it).
    """
    return await asyncio.create_task(coro, context=contextvars.Context())


class ProviderLimits:
    """The engine's `orchestrator.ports.CallAdmission`: a permit from the provider's queue per request."""

    def __init__(
        self,
        limits: Mapping[str, ProviderLimit],
        *,
        poll: float,
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        self.limits = dict(limits)
        self.poll = poll
        # Called with (provider, seconds waited) for each admitted request (a metric).
        self.observe = observe
        self._queues: dict[str, Queue] = {}

    async def register(self, *, update: bool) -> None:
        """Register every limited provider's queue (every process must, or DBOS strands its permits).

        `update`: this process's settings become the queue's (workers); a front end only makes
        sure the queue exists.
        """
        for name, limit in self.limits.items():
            limiter = None
            if limit.requests is not None and limit.period is not None:
                limiter = {"limit": limit.requests, "period": queue_period(limit.period)}
            self._queues[name] = await DBOS.register_queue_async(
                QUEUE_PREFIX + name,
                limiter=limiter,  # type: ignore[arg-type]  # a QueueRateLimit TypedDict
                global_concurrency=limit.concurrent,
                polling_interval_sec=self.poll,
                on_conflict="always_update" if update else "never_update",
            )

    def forget(self) -> None:
        """The engine stopped: admit at once from now on (nothing polls the queues any more)."""
        self._queues = {}

    @contextlib.asynccontextmanager
    async def admit(self, provider: str, *, within: float) -> AsyncIterator[None]:
        """Wait for the provider's permit (at most `within` s), then hold it for the block."""
        queue = self._queues.get(provider)
        if queue is None:  # not limited
            yield
            return
        holds = self.limits[provider].concurrent is not None
        permit = f"permit-{provider}-{uuid.uuid4().hex}"
        loop = asyncio.get_running_loop()
        begun = loop.time()
        await self._wait(queue, permit, within, holds)
        if self.observe is not None:
            self.observe(provider, loop.time() - begun)
        try:
            yield
        finally:
            if holds:
                await self._release(permit)

    async def _wait(self, queue: Queue, permit: str, within: float, holds: bool) -> None:
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            loop.call_soon_threadsafe(_resolve, started)

        _waiting[permit] = wake
        try:
            until = time.time() + within if holds else 0.0
            await _outside(_enqueue(queue, permit, until))
            async with asyncio.timeout(within):
                await _started(permit, started, within)
        except BaseException:  # not admitted in time, or the call was cancelled: the permit must not count
            with contextlib.suppress(Exception):
                await asyncio.shield(_outside(DBOS.cancel_workflow_async(permit)))
            raise
        finally:
            _waiting.pop(permit, None)

    async def _release(self, permit: str) -> None:
        try:
            await asyncio.shield(_outside(DBOS.send_async(permit, "done", RELEASE)))
        except Exception:  # the permit then holds its slot until its deadline
            log.warning("could not release %s", permit, exc_info=True)


async def _enqueue(queue: Queue, permit: str, until: float) -> None:
    with SetWorkflowID(permit):
        await queue.enqueue_async(permit_workflow, until)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _started(permit: str, here: asyncio.Future[None], within: float) -> None:
    """Until the permit started: told by the permit itself here, or by its event from elsewhere."""
    there = asyncio.create_task(
        DBOS.get_event_async(permit, STARTED, timeout_seconds=within), context=contextvars.Context()
    )
    try:
        await asyncio.wait({here, there}, return_when=asyncio.FIRST_COMPLETED)
        if not here.done() and there.result() is None:
            raise TimeoutError(f"permit {permit} did not start within {within:g} s")
    finally:
        there.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await there


__all__ = ["PERMIT", "QUEUE_PREFIX", "ProviderLimits", "permit_workflow", "queue_period"]
