"""Per-provider limits held in one process: a sliding window of requests, slots for calls in flight.

`LocalLimits` is the in-process `orchestrator.ports.CallAdmission`, with the semantics of the bot
engine's fleet-wide permits for one process alone (and in front of them: `bot.engine.limits`): a
request counts in its provider's window from the moment
it is admitted, and for `period` plus a margin (`margin`: the request reaches the provider a little
later than it was admitted, and not equally later for each); a concurrency slot is taken before
the window is looked at and held for the block. Waits are bounded by `within` and raise
`TimeoutError` (the adapter makes that a retryable provider error), at once when the window will
not open in time. Nothing here is shared with another process: a limit is this process's alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class CallLimit:
    """One provider's limits: `requests` per `period` seconds, `concurrent` calls in flight."""

    requests: int | None = None
    period: float | None = None
    concurrent: int | None = None


def margin(period: float) -> float:
    """How much longer a window lasts than the provider's `period`: the admission-to-arrival slack.

    A request that reaches the provider within this margin of its admission keeps every window of
    the provider's period under the limit.
    """
    return min(0.5, 0.2 * period)


class Window:
    """The admissions of the last `span` seconds, at most `requests` of them (times are arguments)."""

    def __init__(self, requests: int, span: float) -> None:
        self.requests, self.span = requests, span
        self._times: deque[float] = deque()

    def delay(self, now: float) -> float:
        """Seconds until one more admission fits (0: now)."""
        self._expire(now)
        excess = len(self._times) - self.requests
        if excess < 0:
            return 0.0
        # The admissions noted from elsewhere may exceed the limit: this many must leave first.
        return self._times[excess] + self.span - now

    def record(self, now: float) -> None:
        """Count an admission at `now`."""
        self._expire(now)
        self._times.append(now)

    def __len__(self) -> int:
        return len(self._times)

    def _expire(self, now: float) -> None:
        # Half-open: an admission at t counts in [t, t + span).
        while self._times and self._times[0] + self.span <= now:
            self._times.popleft()


class Slots:
    """`size` calls in flight, handed out in order."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.held = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def take(self) -> None:
        """Wait for a free slot and hold it."""
        if self.held < self.size and not self._waiting:
            self.held += 1
            return
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(handed)
        try:
            await handed
        except BaseException:
            if handed.done() and not handed.cancelled():  # a slot came, but too late: pass it on
                self.give()
            with contextlib.suppress(ValueError):
                self._waiting.remove(handed)
            raise

    def give(self) -> None:
        """Free a slot: the longest waiter gets it."""
        self.held -= 1
        while self.held < self.size and self._waiting:
            handed = self._waiting.popleft()
            if not handed.done():  # a waiter that gave up is skipped
                self.held += 1
                handed.set_result(None)


class _Provider:
    """One provider's window and slots; `_turn` lets the waiters watch the window one at a time, in order."""

    def __init__(self, name: str, limit: CallLimit) -> None:
        self.name = name
        self.window = None
        if limit.requests is not None and limit.period is not None:
            self.window = Window(limit.requests, limit.period + margin(limit.period))
        self.slots = Slots(limit.concurrent) if limit.concurrent is not None else None
        self._turn = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def admitted(self, within: float) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        end = loop.time() + within
        if within <= 0:
            raise TimeoutError(f"{self.name}: no time left to be admitted")
        if self.slots is not None:
            async with asyncio.timeout_at(end):
                await self.slots.take()
        try:
            if self.window is not None:
                async with asyncio.timeout_at(end):
                    await self._pace(self.window, end)
        except BaseException:
            if self.slots is not None:
                self.slots.give()
            raise
        try:
            yield
        finally:
            if self.slots is not None:
                self.slots.give()

    async def _pace(self, window: Window, end: float) -> None:
        loop = asyncio.get_running_loop()
        async with self._turn:
            while True:
                now = loop.time()
                delay = window.delay(now)
                if delay <= 0:
                    window.record(now)
                    return
                if now + delay > end:  # it will not open in time: say so now, not at the deadline
                    raise TimeoutError(f"{self.name}: its window is full for {delay:.3g} s more")
                await asyncio.sleep(delay)  # until the oldest admission leaves the window


class LocalLimits:
    """A `CallAdmission` holding this process's requests under each provider's `CallLimit`."""

    def __init__(self, limits: Mapping[str, CallLimit]) -> None:
        self.limits = dict(limits)
        # Built on first use: the locks and conditions belong to the loop that uses them.
        self._providers: dict[str, _Provider] = {}

    @contextlib.asynccontextmanager
    async def admit(self, provider: str, *, within: float) -> AsyncIterator[None]:
        """Wait (at most `within` s) for a slot and room in the window, then hold the slot for the block."""
        state = self._provider(provider)
        if state is None:  # not limited
            yield
            return
        async with state.admitted(within):
            yield

    def _provider(self, name: str) -> _Provider | None:
        state = self._providers.get(name)
        if state is None and name in self.limits:
            state = self._providers[name] = _Provider(name, self.limits[name])
        return state


__all__ = ["CallLimit", "LocalLimits", "Slots", "Window", "margin"]
