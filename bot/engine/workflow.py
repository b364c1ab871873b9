"""The run workflow: one DBOS workflow per run, its id the run id (a duplicate delivery dedups).

Its one kind of step asks this process's run executor to start or resume the run and returns how
the run stands: a terminal event's kind, or `PARKED` when nothing can move without a human. A
parked workflow `recv`s a wake (a decision, a control, expiry) with an explicit timeout and checks
again. The step is not retried by DBOS: a crash re-runs it on recovery, and the executor resumes
from the run store, redoing at most the turns that were in flight.

DBOS runs queued workflows on its own event loop thread; the executor lives on the bot's loop
(its outbox, database engine and tasks belong there), so the step hands the call over to it.

A process that launches its engine `paused` holds every step at its start until `open_steps`:
DBOS resumes this executor's pending runs the moment it launches, and a hundred runs resuming
on the bot's loop would starve the start-up work still to do (recovering orphans, waking
settled runs, the expiry timers), and with it the moment the process serves.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from dbos import DBOS

from bot.engine.config import FENCED, PARKED, SUSPEND_RETRY, SUSPENDED

log = logging.getLogger(__name__)
T = TypeVar("T")

WORKFLOW = "massgen.run"
WAKE = "wake"
NOT_HOSTED = "not_hosted"
FENCE_POLL = 0.1  # seconds between a waiting step's looks at whether its worker is fenced still


class RunExecutor(Protocol):
    """What a worker process runs a run with (the bot's run supervisor)."""

    async def execute(self, run_id: str, payload: dict[str, Any]) -> str:
        """Start or resume the run; its terminal kind, `PARKED`, or `SUSPENDED`."""
        ...


@dataclass(slots=True)
class _Host:
    executor: RunExecutor
    loop: asyncio.AbstractEventLoop
    park_timeout: float
    # Set from the bot's loop, read on DBOS's: Events, not bools.
    closing: threading.Event = field(default_factory=threading.Event)
    fenced: threading.Event = field(default_factory=threading.Event)
    # Set on the bot's loop, awaited there: steps begin once the process's start-up is done.
    opened: asyncio.Event = field(default_factory=asyncio.Event)


_host: _Host | None = None


def host(
    executor: RunExecutor, loop: asyncio.AbstractEventLoop, *, park_timeout: float, paused: bool = False
) -> None:
    """Make `executor` (on `loop`) the one this process's workflow steps call; called on `loop`.

    `paused`: steps wait at their start until `open_steps()`.
    """
    global _host  # DBOS workflows are module-level functions: one host per process
    _host = _Host(executor, loop, park_timeout)
    if not paused:
        _host.opened.set()


def open_steps() -> None:
    """Start-up is done: steps held by `host(paused=True)` begin (call on the bot's loop)."""
    if _host is not None:
        _host.opened.set()


def fence(on: bool) -> None:
    """This worker's heartbeat is failing (`on`) or stored again: steps wait meanwhile, then start."""
    if _host is not None:
        if on:
            _host.fenced.set()
        else:
            _host.fenced.clear()


def drain() -> None:
    """Shutdown begins: steps that start from now on, or are cut short, leave their runs pending."""
    if _host is not None:
        _host.closing.set()
        _host.opened.set()  # a step still held sees the closing at once, and abandons


def unhost() -> None:
    """Shutdown: steps cut short from now on leave their runs pending for recovery."""
    global _host
    if _host is not None:
        _host.closing.set()
        _host.opened.set()
    _host = None


async def _abandon() -> str:
    """A step whose process is shutting down never returns: its workflow stays pending, and is recovered."""
    await asyncio.Event().wait()
    return PARKED  # unreachable


async def _on_host(current: _Host, coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` on the bot's loop (the step runs on DBOS's, or on the same one in tests)."""
    if asyncio.get_running_loop() is current.loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, current.loop))


@DBOS.step(name=f"{WORKFLOW}.execute")
async def execute_step(run_id: str, payload: dict[str, Any]) -> str:
    """Start or resume the run on this process's executor."""
    current = _host
    if current is not None and not current.opened.is_set():
        await _on_host(current, current.opened.wait())
    # A thread's Event set from the bot's loop: looked at, not awaited. Another worker may take the
    # run over meanwhile; it is not driven here.
    while current is not None and current.fenced.is_set() and not current.closing.is_set():  # noqa: ASYNC110
        await asyncio.sleep(FENCE_POLL)
    if current is None or current.closing.is_set():
        return await _abandon()
    try:
        outcome = await _on_host(current, current.executor.execute(run_id, payload))
    except asyncio.CancelledError:
        if current.closing.is_set():
            return await _abandon()
        raise
    if outcome == FENCED:  # its successor drives it: this copy records nothing, ever
        return await _abandon()
    return outcome


@DBOS.workflow(name=WORKFLOW)
async def run_workflow(run_id: str, payload: dict[str, Any]) -> str:
    """Execute the run; while it is parked, wait for a wake and look again.

    A suspended run (its store was away for longer than it could wait) is executed again after a
    pause: it resumes from what was stored. DBOS itself waits for its database meanwhile.
    """
    while True:
        outcome = await execute_step(run_id, payload)
        if outcome == SUSPENDED:
            await DBOS.sleep_async(SUSPEND_RETRY)
            continue
        if outcome != PARKED:
            return outcome
        timeout = _host.park_timeout if _host is not None else 3600.0
        await DBOS.recv_async(WAKE, timeout_seconds=timeout)  # None on timeout: check again anyway


__all__ = [
    "PARKED",
    "SUSPENDED",
    "WAKE",
    "WORKFLOW",
    "RunExecutor",
    "drain",
    "execute_step",
    "fence",
    "host",
    "open_steps",
    "run_workflow",
    "unhost",
]
