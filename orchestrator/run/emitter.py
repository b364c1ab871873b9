"""Stamps events (run id, dense seq, time), folds them into the coordination state, then delivers them.

`emit` is synchronous up to the fold, so the runner's scheduling decisions see every event at once
and two agents can never interleave between a check and its event. Delivery (store first, then
subscribers, in seq order) runs in one drain task; the events queued while it stored the last
ones are stored together, in one transaction: a slow subscriber delays others' delivery, never
the run. A failing subscriber is logged and skipped.

A run never goes on unpersisted (fail-stop): a failed store write is retried with backoff for up to
`retry_for` seconds while `checkpoint` waits (so a tool call is stored as started before it runs,
whatever the store does meanwhile). If it still cannot be stored, the emitter is lost: `store_error`
says why, `on_lost` is told once, `checkpoint`/`stored` raise `RunStoreUnavailable`, and nothing
unstored reaches a subscriber (what Slack shows is always in the store). The run then suspends and
is resumed from its stored prefix later. A write refused as `RunFenced` (another driver stored
that seq first) loses the emitter at once: the run is someone else's.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

from orchestrator.errors import RunFenced, RunStoreUnavailable
from orchestrator.events import TERMINAL_KINDS, RunEvent
from orchestrator.ports import RunStore
from orchestrator.run.coordination import CoordinationState

Subscriber = Callable[[RunEvent], Awaitable[None] | None]
# Events queued while a transaction was under way are stored together, at most this many at once.
BATCH = 64
# A failed write is tried again after FIRST_BACKOFF seconds, doubling up to MAX_BACKOFF.
FIRST_BACKOFF = 0.05
MAX_BACKOFF = 2.0
log = logging.getLogger(__name__)


class Emitter:
    """One per run."""

    def __init__(
        self,
        run_id: str,
        *,
        clock: Callable[[], float],
        store: RunStore | None,
        state: CoordinationState,
        retry_for: float = 600.0,
        on_lost: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.state = state
        self.store_error: BaseException | None = None
        self.terminal: RunEvent | None = None
        self._clock = clock
        self._store = store
        self._seq = state.last_seq
        self._subscribers: list[Subscriber] = []
        self._queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        self._drained = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._delivered_seq = state.last_seq
        self._delivered = asyncio.Event()
        self._persisted_seq = state.last_seq
        self._persisted = asyncio.Event()
        self.retry_for = retry_for
        self._on_lost = on_lost

    def start(self) -> None:
        """Start the delivery task (needs a running loop)."""
        self._task = asyncio.create_task(self._drain(), name=f"run-{self.run_id}-events")

    def emit(self, event: RunEvent) -> RunEvent:
        """Stamp, fold and queue one event; returns the stamped event."""
        if self.terminal is not None:
            # A straggler (e.g. a toolbox cleaning up) must not break a finished run: drop it, loudly.
            log.warning("run %s already ended; dropped a late %s event", self.run_id, event.kind)
            return event
        self._seq += 1
        stamped = replace(event, run_id=self.run_id, seq=self._seq, at=self._clock())
        self.state = self.state.apply(stamped)
        if stamped.kind in TERMINAL_KINDS:
            self.terminal = stamped
        self._queue.put_nowait(stamped)
        # Wake everyone waiting for a state change, then arm a fresh event for the next one.
        self._changed.set()
        self._changed = asyncio.Event()
        return stamped

    async def emit_async(self, event: RunEvent) -> None:
        """`emit` for callers that take an awaitable callback (the toolbox's RunContext.emit)."""
        self.emit(event)

    async def checkpoint(self, event: RunEvent) -> None:
        """Emit `event` and return once it is in the store (before subscribers see it).

        What a restart must not repeat (a completed model call, a tool about to execute) waits
        for this; without a store it returns at once (nothing resumes). Raises
        `RunStoreUnavailable` once the store is lost: the caller must not act on the event.
        """
        stamped = self.emit(event)
        await self._stored(stamped.seq)

    async def stored(self) -> None:
        """Return once every event emitted so far is in the store (not waiting for subscribers)."""
        await self._stored(self._seq)

    async def _stored(self, seq: int) -> None:
        while (
            self._store is not None
            and self.store_error is None
            and self._persisted_seq < seq
            and not self._drained.is_set()
        ):
            await self._persisted.wait()
        self.check()

    def check(self) -> None:
        """Raise `RunStoreUnavailable` if the store was lost (events from then on are not kept)."""
        if self.store_error is not None:
            raise RunStoreUnavailable(self.run_id, self.store_error)

    async def changed(self) -> None:
        """Return after the next emitted event."""
        await self._changed.wait()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Deliver every later event to `callback`; returns an unsubscribe function."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    async def stream(self) -> AsyncIterator[RunEvent]:
        """Live events from now on, ending with the terminal event (or `RunParked`)."""
        if self.terminal is not None and self._drained.is_set():
            yield self.terminal
            return
        queue: asyncio.Queue[RunEvent] = asyncio.Queue()
        unsubscribe = self.subscribe(queue.put_nowait)
        try:
            while True:
                event = await queue.get()
                yield event
                if event.kind in TERMINAL_KINDS or event.kind == "parked":
                    return
        finally:
            unsubscribe()

    async def flush(self) -> None:
        """Return once every event emitted so far is persisted and delivered."""
        target = self._seq
        while self._delivered_seq < target and not self._drained.is_set():
            await self._delivered.wait()

    async def close(self) -> None:
        """Deliver everything queued, then stop the delivery task."""
        if self._task is None:
            return
        self._queue.put_nowait(None)
        await self._drained.wait()
        await self._task

    async def _drain(self) -> None:
        ended = False
        while not ended:
            batch, ended = await self._next_batch()
            if not batch:
                break
            if not await self._persist(batch):  # stored before anyone hears of them
                break  # lost: nothing unstored is delivered, later events are dropped
            self._persisted_seq = batch[-1].seq
            self._persisted.set()
            self._persisted = asyncio.Event()
            for event in batch:
                await self._deliver(event)
        self._drained.set()
        self._persisted.set()

    async def _next_batch(self) -> tuple[list[RunEvent], bool]:
        """The next event and those queued behind it (at most BATCH); whether `close` came too."""
        first = await self._queue.get()
        if first is None:
            return [], True
        batch = [first]
        while len(batch) < BATCH and not self._queue.empty():
            event = self._queue.get_nowait()
            if event is None:
                return batch, True
            batch.append(event)
        return batch, False

    async def _deliver(self, event: RunEvent) -> None:
        for callback in list(self._subscribers):
            try:
                result = callback(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("run %s: subscriber %r failed on %s", self.run_id, callback, event.kind)
        self._delivered_seq = event.seq
        self._delivered.set()
        self._delivered = asyncio.Event()

    async def _persist(self, batch: list[RunEvent]) -> bool:
        """Store `batch`, trying again with backoff for `retry_for` seconds; whether it was stored."""
        if self._store is None:
            return True
        give_up = time.monotonic() + self.retry_for
        backoff = FIRST_BACKOFF
        while True:
            try:
                await self._store.append(*batch)
                return True
            except Exception as exc:
                left = give_up - time.monotonic()
                if left <= 0 or isinstance(exc, RunFenced):  # fenced: another driver has the run
                    self._lose(exc, batch[0].seq)
                    return False
                log.warning(
                    "run %s: storing seq %d failed (%r); trying again in %.2f s",
                    self.run_id,
                    batch[0].seq,
                    exc,
                    min(backoff, left),
                )
                await asyncio.sleep(min(backoff, left))
                backoff = min(backoff * 2, MAX_BACKOFF)

    def _lose(self, exc: BaseException, seq: int) -> None:
        self.store_error = exc
        log.error(
            "run %s: store failed at seq %d for %.0f s; the run suspends", self.run_id, seq, self.retry_for
        )
        if self._on_lost is not None:
            self._on_lost(exc)
