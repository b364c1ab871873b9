"""The in-process driver: a run resumed after each decision until it ends.

For callers that hold the run in their own process (`massgen-bot run`, tests, benches): start (or
resume) it; on `Parked`, wait through the approval port until one awaited request is decided
(from anywhere: the service polls its store), then resume by id; repeat until a terminal event.
No coroutine of the run waits for a human; only the driver waits, and it holds no run state.
A durable engine does the same with a workflow per run instead (the driver is not needed there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Literal

from approvals import ConversationRef
from orchestrator.config.team import TeamConfig
from orchestrator.errors import RunFenced
from orchestrator.ports import ApprovalPort, RunStore, RunToolsFactory
from orchestrator.run.emitter import Subscriber
from orchestrator.run.launch import RunHandle, resume_run, start_run, stop_parked_run
from orchestrator.run.supervisor import ModelFactory, Parked, Suspended, Terminal
from orchestrator.store import InMemoryRunStore

log = logging.getLogger(__name__)


class RunDriver:
    """Drives one run to its end across parks; `stop()` cancels or finishes it, live or parked."""

    def __init__(
        self,
        team: TeamConfig,
        *,
        approvals: ApprovalPort,
        store: RunStore | None = None,
        models: ModelFactory | None = None,
        tools: RunToolsFactory | None = None,
        clock: Callable[[], float] = time.time,
        subscribers: Sequence[Subscriber] = (),
        on_handle: Callable[[RunHandle], None] | None = None,
    ) -> None:
        self.team = team
        self.store: RunStore = store if store is not None else InMemoryRunStore()
        self._approvals = approvals
        self._models = models
        self._tools = tools
        self._clock = clock
        self._subscribers = tuple(subscribers)
        self._on_handle = on_handle
        self.handle: RunHandle | None = None  # the live segment, if one runs
        self.parks = 0  # how often the run parked
        self._stop: tuple[Literal["cancel", "finish_now"], str | None] | None = None
        self._waiting: asyncio.Task[None] | None = None

    async def start(
        self,
        task: str,
        *,
        run_id: str | None = None,
        requester: str | None = None,
        context: str | None = None,
        team_name: str | None = None,
        conversation: ConversationRef | None = None,
    ) -> Terminal:
        """Start the run and drive it through every park to its terminal event."""
        handle = await start_run(
            self.team,
            task,
            models=self._models,
            tools=self._tools,
            store=self.store,
            run_id=run_id,
            requester=requester,
            context=context,
            clock=self._clock,
            subscribers=self._subscribers,
            team_name=team_name,
            conversation=conversation,
        )
        return await self._drive(handle)

    async def resume(self, run_id: str) -> Terminal:
        """Resume a stored run (parked, or left by a dead process) and drive it to its end."""
        return await self._drive(await self._resume(run_id))

    async def stop(self, how: Literal["cancel", "finish_now"], by: str | None = None) -> None:
        """Cancel (or finish now) the run: a live segment is stopped, a parked run ended unresumed."""
        self._stop = (how, by)
        handle = self.handle
        if handle is not None:
            await (handle.cancel(by) if how == "cancel" else handle.finish_now(by))
        if self._waiting is not None:
            self._waiting.cancel()

    async def _resume(self, run_id: str) -> RunHandle:
        return await resume_run(
            run_id,
            self.team,
            self.store,
            models=self._models,
            tools=self._tools,
            clock=self._clock,
            subscribers=self._subscribers,
        )

    async def _drive(self, handle: RunHandle) -> Terminal:
        while True:
            self.handle = handle
            if self._on_handle is not None:
                self._on_handle(handle)
            outcome = await handle.outcome()
            self.handle = None
            if not isinstance(outcome, Parked):
                return outcome
            if isinstance(outcome, Suspended) and outcome.fenced:
                raise RunFenced(outcome.run_id, 0)  # another process drives it now
            if isinstance(outcome, Suspended):  # its store was away: resume once it may be back
                await asyncio.sleep(outcome.retry_after)
                handle = await self._resume(outcome.run_id)
                continue
            self.parks += 1
            if self._stop is None:
                await self._decided(outcome)
            if self._stop is not None:
                how, by = self._stop
                return await stop_parked_run(
                    outcome.run_id,
                    self.team,
                    self.store,
                    how,
                    by=by,
                    tools=self._tools,
                    clock=self._clock,
                    subscribers=self._subscribers,
                )
            handle = await self._resume(outcome.run_id)

    async def _decided(self, parked: Parked) -> None:
        """Return once any awaited request is terminal (or `stop()` was called)."""
        self._waiting = asyncio.create_task(_first_decision(self._approvals, parked.waiting))
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await self._waiting
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise asyncio.CancelledError
        finally:
            self._waiting = None


async def _first_decision(approvals: ApprovalPort, waiting: Sequence[str]) -> None:
    if not waiting:
        return
    waits = [asyncio.create_task(approvals.wait(request_id)) for request_id in waiting]
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task.exception() is not None:  # e.g. an unknown id: the resume denies that call
                log.warning("waiting for an approval failed: %r", task.exception())
    finally:
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def drive_run(
    team: TeamConfig,
    task: str,
    *,
    approvals: ApprovalPort,
    store: RunStore | None = None,
    run_id: str | None = None,
    models: ModelFactory | None = None,
    tools: RunToolsFactory | None = None,
    subscribers: Sequence[Subscriber] = (),
    requester: str | None = None,
    context: str | None = None,
    team_name: str | None = None,
    conversation: ConversationRef | None = None,
    clock: Callable[[], float] = time.time,
    on_handle: Callable[[RunHandle], None] | None = None,
) -> Terminal:
    """Start `task` and drive it through every park to its terminal event."""
    driver = RunDriver(
        team,
        approvals=approvals,
        store=store,
        models=models,
        tools=tools,
        clock=clock,
        subscribers=subscribers,
        on_handle=on_handle,
    )
    return await driver.start(
        task,
        run_id=run_id,
        requester=requester,
        context=context,
        team_name=team_name,
        conversation=conversation,
    )
