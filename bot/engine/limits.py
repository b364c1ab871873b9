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

Once the engine stops (a graceful shutdown: short runs still finishing), nothing polls the queues:
admissions then go to this process's own limiter (`orchestrator.LocalLimits`, the same limits held
in process), never through unlimited. That limiter has noted every request the queues admitted
here (its window entry, its slot for the block), so across the switch this process alone stays
under each limit; what it cannot see is the other workers' requests (see the README).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from dbos import DBOS, Queue, SetWorkflowID

from bot.settings import ProviderLimit, call_limits
from orchestrator import LocalLimits
from orchestrator.llm import margin

log = logging.getLogger(__name__)

QUEUE_PREFIX = "provider:"
PERMIT = "massgen.permit"
STARTED = "started"
RELEASE = "release"
T = TypeVar("T")

# Permits this process waits for: permit id -> wakes the waiting call with the permit's start
# time (called on DBOS's loop).
_waiting: dict[str, Callable[[float], None]] = {}
# Permits holding a slot in this process: permit id -> set (on DBOS's loop) to release it.
_held: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}


def queue_period(period: float, *, whole_seconds: bool = False) -> float:
    """The queue's period for a provider's `period`: the margin longer (`orchestrator.llm.margin`: the
    queue counts a request when its permit starts, the provider when it arrives, a little later and
    not equally later for each; a request that arrives within the margin keeps every window of the
    provider's period under the limit).

    `whole_seconds`: the system database stamps starts in whole seconds (DBOS on SQLite under
    Python 3.11), so a window of `p` s ending now may reach back to a start stamped up to one
    second later than it happened; the period is then rounded up to whole seconds, plus one.
    """
    wanted = period + margin(period)
    return float(math.ceil(wanted) + 1) if whole_seconds else wanted


@DBOS.workflow(name=PERMIT)
async def permit_workflow(until: float) -> None:
    """Started when the provider's limits allow one more request; holds a slot until released (or `until`)."""
    permit = DBOS.workflow_id or ""
    at = time.time()
    hold = until - at
    # A caller here releases the permit directly (registered before it is woken, so it finds it):
    # on SQLite a message is seen only at the next wake-up check (`MASSGEN_ENGINE_POLL`, 1 s),
    # which every call would add to the slot's hold.
    here = asyncio.Event()
    if hold > 0:
        _held[permit] = (asyncio.get_running_loop(), here)
    try:
        wake = _waiting.get(permit)
        if wake is not None:
            wake(at)
        await DBOS.set_event_async(STARTED, at)  # for a caller in another process
        if hold > 0:
            await _hold(here, hold)
    finally:
        _held.pop(permit, None)


async def _hold(here: asyncio.Event, hold: float) -> None:
    """Until the release: the message (from any process), or `here` (set by a caller in this one)."""
    message = asyncio.ensure_future(DBOS.recv_async(RELEASE, timeout_seconds=hold))
    released = asyncio.ensure_future(here.wait())
    try:
        await asyncio.wait({message, released}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in (message, released):
            waiting.cancel()
        await asyncio.gather(message, released, return_exceptions=True)


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
        whole_seconds: bool = False,
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        self.limits = dict(limits)
        self.poll = poll
        self.whole_seconds = whole_seconds  # see `queue_period`
        # Called with (provider, seconds waited) for each admitted request (a metric).
        self.observe = observe
        self._queues: dict[str, Queue] = {}
        # Runs recovered at launch may call a model before the queues are registered: they wait.
        self._registered = asyncio.Event()
        # Set once the engine stops: a call waiting for a permit then goes to `fallback` instead.
        self._stopping = asyncio.Event()
        # What admits once the engine has stopped: these limits, held by this process alone.
        self.fallback = LocalLimits(call_limits(self.limits))

    async def register(self, *, update: bool) -> None:
        """Register every limited provider's queue (every process must, or DBOS strands its permits).

        `update`: this process's settings become the queue's (workers); a front end only makes
        sure the queue exists.
        """
        for name, limit in self.limits.items():
            limiter = None
            if limit.requests is not None and limit.period is not None:
                period = queue_period(limit.period, whole_seconds=self.whole_seconds)
                limiter = {"limit": limit.requests, "period": period}
            self._queues[name] = await DBOS.register_queue_async(
                QUEUE_PREFIX + name,
                limiter=limiter,  # type: ignore[arg-type]  # a QueueRateLimit TypedDict
                global_concurrency=limit.concurrent,
                polling_interval_sec=self.poll,
                on_conflict="always_update" if update else "never_update",
            )
        self._registered.set()

    def forget(self) -> None:
        """The engine stopped: from now on (waiting calls too) `fallback` admits; nothing polls the queues."""
        self._stopping.set()
        self._registered.set()

    @contextlib.asynccontextmanager
    async def admit(self, provider: str, *, within: float) -> AsyncIterator[None]:
        """Wait for the provider's permit (at most `within` s), then hold it for the block."""
        limit = self.limits.get(provider)
        if limit is None:  # not limited
            yield
            return
        loop = asyncio.get_running_loop()
        begun = loop.time()
        stopped = self._stopping.is_set
        try:
            permit = None if stopped() else await self._permit(provider, limit, within)
        except Exception:
            if not stopped():  # `_Stopped`, or DBOS failing as it shuts down
                raise
            permit = None
        if permit is None:  # the engine stopped: this process's own limiter, for the time left
            async with self.fallback.admit(provider, within=begun + within - loop.time()):
                self._observe(provider, loop.time() - begun)
                yield
            return
        self._observe(provider, loop.time() - begun)
        try:
            with self.fallback.noted(provider):  # should the engine stop meanwhile
                yield
        finally:
            if limit.concurrent is not None:
                await self._release(permit)

    def _observe(self, provider: str, waited: float) -> None:
        if self.observe is not None:
            self.observe(provider, waited)

    async def _permit(self, provider: str, limit: ProviderLimit, within: float) -> str | None:
        """A permit of the provider's queue that started in time; None if the engine stopped first."""
        loop = asyncio.get_running_loop()
        begun = loop.time()
        if not self._registered.is_set():
            async with asyncio.timeout(within):
                await self._registered.wait()
        queue = self._queues.get(provider)
        if queue is None:  # the engine stopped meanwhile
            return None
        holds = limit.concurrent is not None
        # A permit this caller learns of too late (its loop was busy) may no longer count for the
        # request: the request could reach the provider with the next window's. It takes another.
        late = margin(limit.period) / 2 if limit.period is not None else float("inf")
        while True:
            permit = f"permit-{provider}-{uuid.uuid4().hex}"
            started = await self._wait(queue, permit, begun + within - loop.time(), holds)
            seen = time.time() - started
            if seen <= late:
                return permit
            log.info("%s: a permit seen %.3f s after it started; taking another", provider, seen)
            if holds:
                await self._release(permit)

    async def _wait(self, queue: Queue, permit: str, within: float, holds: bool) -> float:
        """Enqueue `permit` and wait until it started; when it did (this machine's clock)."""
        if within <= 0:
            raise TimeoutError(f"no time left for {permit}")
        loop = asyncio.get_running_loop()
        started: asyncio.Future[float] = loop.create_future()

        def wake(at: float) -> None:
            loop.call_soon_threadsafe(_resolve, started, at)

        _waiting[permit] = wake
        try:
            until = time.time() + within if holds else 0.0
            await _outside(_enqueue(queue, permit, until))
            async with asyncio.timeout(within):
                return await _started(permit, started, within, self._stopping)
        except BaseException:  # not admitted in time, the call was cancelled, the engine stopped
            await _cancel_permit(permit)  # the permit must not count
            raise
        finally:
            _waiting.pop(permit, None)

    async def _release(self, permit: str) -> None:
        here = _held.get(permit)
        if here is not None:  # the permit runs in this process
            loop, event = here
            loop.call_soon_threadsafe(event.set)
            return
        if not await _best_effort(DBOS.send_async(permit, "done", RELEASE)):
            log.warning("could not release %s: it holds its slot until its deadline", permit)


async def _enqueue(queue: Queue, permit: str, until: float) -> None:
    with SetWorkflowID(permit):
        await queue.enqueue_async(permit_workflow, until)


async def _cancel_permit(permit: str) -> None:
    if not await _best_effort(DBOS.cancel_workflow_async(permit)):
        # It then counts once a queue runs it (one that holds a slot: until its deadline).
        log.info("could not cancel %s", permit)


async def _best_effort(call: Coroutine[Any, Any, object]) -> bool:
    """Make a DBOS call outside any DBOS context; False if it failed.

    DBOS shutting down meanwhile (it cancels its own tasks) is a failure, not a cancellation of
    the caller, who goes on.
    """
    try:
        await asyncio.shield(_outside(call))
        return True
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # the caller itself is cancelled
            raise
    except Exception:
        log.debug("a DBOS call failed", exc_info=True)
    return False


def _resolve(future: asyncio.Future[float], at: float) -> None:
    if not future.done():
        future.set_result(at)


class _Stopped(Exception):
    """The engine stopped while a call waited for its permit."""


async def _started(permit: str, here: asyncio.Future[float], within: float, stopping: asyncio.Event) -> float:
    """When the permit started: told by the permit itself here, or by its event from elsewhere.

    Raises `_Stopped` if the engine stops first (nothing will start the permit any more).
    """
    there = asyncio.create_task(
        DBOS.get_event_async(permit, STARTED, timeout_seconds=within), context=contextvars.Context()
    )
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({here, there, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if here.done():
            return here.result()
        if stopped.done():
            raise _Stopped(permit)
        at = there.result()
        if at is None:
            raise TimeoutError(f"permit {permit} did not start within {within:g} s")
        return float(at)
    finally:
        for waiting in (there, stopped):
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await waiting


__all__ = ["PERMIT", "QUEUE_PREFIX", "ProviderLimits", "permit_workflow", "queue_period"]
