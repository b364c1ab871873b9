"""The front end's half of a run: submit it to the engine, wake it when a human decided.

A front end (`--role frontend`, or the one process of a small install) turns a command into a
`RunRequest` and submits its payload; the engine hands the run to a worker, whose executor
(`RunExecutor.execute`) starts or resumes it. The one hand-over between the two halves in a
process that does both is `Handover`: a submission (or a wake) waits until its run begins here,
so `wait_idle` covers the time a run spends queued, and shutdown and the tests can settle.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from bot.runs.request import RunRequest, run_id_for

if TYPE_CHECKING:
    from bot.engine import Engine

SUBMIT_WAIT = 30.0  # seconds a submitting task waits for its run to begin in this process
RECENT_SUBMITS = 1024  # run ids remembered to recognise a redelivery

# run id -> None when this process does not hold the run; else, once its segment ended, whether
# it parked (a wake then resumes it).
SegmentEnded = Callable[[str], Awaitable[bool | None]]
Spawn = Callable[[Coroutine[Any, Any, Any], str], asyncio.Task[Any]]


class Handover:
    """Runs submitted or woken here, until they begin here (or end without needing a wake)."""

    def __init__(self) -> None:
        self._begun: dict[str, asyncio.Event] = {}

    def expect(self, run_id: str) -> asyncio.Event:
        """The event set when `run_id` begins here (one per run, shared by whoever waits)."""
        return self._begun.setdefault(run_id, asyncio.Event())

    def begun(self, run_id: str) -> None:
        """The executor took the run up (or it ended: nothing more will begin)."""
        if (event := self._begun.get(run_id)) is not None:
            event.set()

    def release(self, run_id: str, event: asyncio.Event) -> None:
        if self._begun.get(run_id) is event:
            self._begun.pop(run_id, None)


class RunSubmitter:
    """Submits runs to the engine and wakes parked ones; never runs one itself."""

    def __init__(self, engine: Engine, handover: Handover, spawn: Spawn, segment_ended: SegmentEnded) -> None:
        self.engine = engine
        self._handover = handover
        self._spawn = spawn
        self._segment_ended = segment_ended
        self._submitted: dict[str, None] = {}  # the latest run ids submitted here, oldest first
        self.closing = False

    def start(self, request: RunRequest) -> str:
        """Submit a run in the background; its id at once (derived from Slack's delivery id)."""
        if self.closing:
            raise RuntimeError("the bot is shutting down")
        run_id = run_id_for(request.delivery)
        self._spawn(self._submit(run_id, request), f"submit:{run_id}")
        return run_id

    async def _submit(self, run_id: str, request: RunRequest) -> None:
        engine = self.engine
        if run_id in self._submitted:  # delivered twice: the engine dedups it, nothing to wait for
            await engine.submit(run_id, request.payload())
            return
        self._submitted[run_id] = None
        if len(self._submitted) > RECENT_SUBMITS:
            self._submitted.pop(next(iter(self._submitted)))
        begun = self._handover.expect(run_id)
        try:
            await engine.submit(run_id, request.payload())
            if engine.config.executes:  # until a worker here picks it up (another process may)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(begun.wait(), SUBMIT_WAIT)
        finally:
            self._handover.release(run_id, begun)

    def wake(self, run_id: str, message: Any) -> None:
        """Wake a parked run through the engine (an approval of it ended, here or anywhere).

        A run parked in this process resumes here: the waking task lasts until it begins (as a
        submission does), so `wait_idle` covers the hand-over.
        """
        self._spawn(self._wake(run_id, message), f"wake:{run_id}")

    async def _wake(self, run_id: str, message: Any) -> None:
        begun = self._handover.expect(run_id) if self.engine.config.executes else None
        try:
            if not await self.engine.wake(run_id, message) or begun is None:
                return  # not an engine run (nothing resumes), or it resumes in another process
            if await self._segment_ended(run_id) is False:
                return  # it was live, not parking: the wake is stale, nothing resumes
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(begun.wait(), SUBMIT_WAIT)
        finally:
            if begun is not None:
                self._handover.release(run_id, begun)


__all__ = ["RECENT_SUBMITS", "SUBMIT_WAIT", "Handover", "RunSubmitter"]
