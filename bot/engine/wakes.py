"""Wake a run when one of its approvals is decided, expires or is cancelled, from whichever process.

A parked run's workflow waits in `recv` for a wake and then checks again; a wake sent to a run
that is not parked is harmless (the next check finds nothing new). The bot's processes send it
through their launched engine; the CLI (`massgen-bot approvals approve|deny|files`), which does
not launch one, through DBOS's client on the same system database.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from approvals import (
    ApprovalCancelled,
    ApprovalDecided,
    ApprovalEvent,
    ApprovalExpired,
    ApprovalService,
)
from bot.engine.config import system_database_url
from bot.settings import BotSettings
from orchestrator import RunParked, RunStore

if TYPE_CHECKING:
    from dbos import DBOSClient

log = logging.getLogger(__name__)

Send = Callable[[str, Any], Awaitable[None]]


def wake_on_decisions(service: ApprovalService, send: Send) -> Callable[[], None]:
    """Send a wake to the run of every approval that reaches its end; returns the unsubscribe."""

    async def on_event(event: ApprovalEvent) -> None:
        match event:
            case ApprovalDecided(final=True) | ApprovalExpired() | ApprovalCancelled():
                request = event.request
            case _:
                return
        try:
            await send(request.run_id, {"approval": request.id})
        except Exception as exc:  # the decision is stored; a parked run re-checks at its timeout anyway
            log.warning("could not wake run %s for %s: %s", request.run_id, request.id, exc)

    return service.subscribe(on_event)


async def wake_settled(
    store: RunStore, approvals: ApprovalService, run_ids: Iterable[str], send: Send
) -> list[str]:
    """Start-up: wake the parked runs among `run_ids` that a stored decision already settled.

    A process killed between storing a decision and sending its wake leaves the run parked until
    its workflow's timeout (an hour by default); the decision is in the store, so look. Returns
    the runs woken. A failed send is logged: the workflow's own timeout still comes. The runs are
    looked at a few at a time (after a crash there may be hundreds, and the process serves only
    once this is done), and their wakes sent in the order given.
    """
    ids = list(run_ids)
    room = asyncio.Semaphore(_AT_ONCE)

    async def settled(run_id: str) -> str | None:
        async with room:
            return await _settled_request(store, approvals, run_id)

    found = await asyncio.gather(*(settled(run_id) for run_id in ids))
    woken: list[str] = []
    for run_id, request_id in zip(ids, found, strict=True):
        if request_id is None:
            continue
        try:
            await send(run_id, {"approval": request_id})
        except Exception as exc:
            log.warning("could not wake run %s for %s: %s", run_id, request_id, exc)
        else:
            woken.append(run_id)
    if woken:
        log.info("woke %d parked runs whose approvals were settled before the restart", len(woken))
    return woken


_AT_ONCE = 8  # run logs read at a time by `wake_settled` (the pool has connections for others too)


async def _settled_request(store: RunStore, approvals: ApprovalService, run_id: str) -> str | None:
    """The first request a parked run waits for that is no longer pending, if any."""
    events = await store.events(run_id)
    if not events or not isinstance(events[-1], RunParked):
        return None
    for request_id in events[-1].waiting:
        request = await approvals.get(request_id)
        if request is not None and request.status != "pending":
            return request_id
    return None


class OutsideWaker:
    """Wakes runs from a process that runs no engine, through DBOS's client (connected on first use)."""

    def __init__(self, settings: BotSettings) -> None:
        self._url = system_database_url(settings)
        self._client: DBOSClient | None = None

    async def send(self, run_id: str, message: Any) -> None:
        """Send the wake (raises when the system database cannot be reached)."""
        from bot.engine.workflow import WAKE

        if self._client is None:
            from dbos import DBOSClient

            self._client = await asyncio.to_thread(DBOSClient, system_database_url=self._url)
        await self._client.send_async(run_id, message, WAKE)

    async def close(self) -> None:
        """Release the client's connections."""
        if self._client is not None:
            await asyncio.to_thread(self._client.destroy)
            self._client = None


__all__ = ["OutsideWaker", "wake_on_decisions", "wake_settled"]
