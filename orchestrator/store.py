"""A run's summary (a fold over its events) and the in-memory `RunStore` (port: `orchestrator.ports`).

The summary is the one truth about a run's state: who asked, which team, the task, where it lives
(an opaque `ConversationRef`), its status, final answer, spend and timestamps. Surfaces keep only their
own coordinates beside it (the bot: message timestamps). `LeaseHolder` says who drives a run now
(the SQL store's lease lives in `orchestrator.lease`; the in-memory one here, for one process).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Literal

from approvals import ConversationRef
from orchestrator.errors import RunBusy, RunFenced, RunStoreError
from orchestrator.events import RunEvent, RunFailed, RunFinished, RunStarted, UsageUpdated

RunStatus = Literal["running", "finished", "failed", "cancelled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One row per run, kept up to date from its events."""

    run_id: str
    task: str
    status: RunStatus = "running"
    requester: str | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    winner: str | None = None
    salvage: str | None = None
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    last_seq: int = 0
    team: str | None = None
    conversation: ConversationRef | None = None
    final_answer: str | None = None  # set when the run finished with an answer

    @property
    def running(self) -> bool:
        """Whether the run has not ended (or its process died before it could say so)."""
        return self.status == "running"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """Which runs to list: every given filter must match; newest first, at most `limit`."""

    limit: int = 50
    status: RunStatus | None = None
    requester: str | None = None
    surface: str | None = None  # with `channel`: the runs of one conversation channel
    channel: str | None = None

    def matches(self, summary: RunSummary) -> bool:
        """Whether `summary` passes every filter (the in-memory store's WHERE clause)."""
        where = summary.conversation
        return (
            (self.status is None or summary.status == self.status)
            and (self.requester is None or summary.requester == self.requester)
            and (self.surface is None or (where is not None and where.surface == self.surface))
            and (self.channel is None or (where is not None and where.channel == self.channel))
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseHolder:
    """Who holds a run: a process on a host, since a time (seconds since the epoch)."""

    pid: int
    host: str
    since: float

    @classmethod
    def here(cls) -> LeaseHolder:
        """This process, now."""
        return cls(pid=os.getpid(), host=socket.gethostname(), since=time.time())

    def describe(self, now: float | None = None) -> str:
        """`pid 1234 on host h, since 18:40:02 UTC` (the date too when it is not today's)."""
        today = time.gmtime(time.time() if now is None else now)[:3]
        shape = "%H:%M:%S UTC" if time.gmtime(self.since)[:3] == today else "%Y-%m-%d %H:%M:%S UTC"
        return f"pid {self.pid} on host {self.host}, since {time.strftime(shape, time.gmtime(self.since))}"


def summarise(summary: RunSummary | None, event: RunEvent) -> RunSummary | None:
    """The summary after `event` (pure; both adapters use it)."""
    if isinstance(event, RunStarted):
        return RunSummary(
            run_id=event.run_id,
            task=event.task,
            requester=event.requester,
            started_at=event.at,
            team=event.team,
            conversation=event.conversation,
        )
    if summary is None:
        return None
    summary = replace(summary, last_seq=max(summary.last_seq, event.seq))
    match event:
        case UsageUpdated():
            return replace(
                summary,
                cost_usd=event.run_cost_usd,
                input_tokens=event.run_input_tokens,
                output_tokens=event.run_output_tokens,
            )
        case RunFinished():
            return replace(
                summary,
                status="finished",
                ended_at=event.at,
                winner=event.winner,
                salvage=event.salvage,
                final_answer=event.answer,
            )
        case RunFailed():
            return replace(summary, status="failed", ended_at=event.at)
        case _ if event.kind == "cancelled":
            return replace(summary, status="cancelled", ended_at=event.at)
        case _:
            return summary


class KeptLease:
    """A lease nothing outside this process can take away (the in-memory stores')."""

    async def lost(self) -> str:
        """Never returns."""
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover


class InMemoryRunStore:
    """A dict-backed `RunStore` for tests and the terminal runner without a database."""

    def __init__(self) -> None:
        self._events: dict[str, list[RunEvent]] = {}
        self._summaries: dict[str, RunSummary] = {}
        self._leased: dict[str, LeaseHolder] = {}

    async def append(self, *events: RunEvent) -> None:
        """Keep the events and fold them into their run's summary (a seq once, as the SQL store does)."""
        kept = {e.seq: e for e in self._events.get(events[0].run_id, [])} if events else {}
        for event in events:
            if event.seq in kept and kept[event.seq] != event:
                raise RunFenced(event.run_id, event.seq)
        if events and all(e.seq in kept for e in events):
            return  # the same batch again (a retry after a lost acknowledgement): stored already
        if any(e.seq in kept for e in events):
            raise RunStoreError(f"run {events[0].run_id}: seq {events[0].seq} already stored")
        for event in events:
            self._events.setdefault(event.run_id, []).append(event)
            summary = summarise(self._summaries.get(event.run_id), event)
            if summary is not None:
                self._summaries[event.run_id] = summary

    async def events(self, run_id: str) -> list[RunEvent]:
        """The run's events in order."""
        return sorted(self._events.get(run_id, []), key=lambda e: e.seq)

    async def runs(self, limit: int = 50, *, status: RunStatus | None = None) -> list[RunSummary]:
        """Newest first."""
        return await self.find(RunQuery(limit=limit, status=status))

    async def find(self, query: RunQuery) -> list[RunSummary]:
        """The runs matching `query`, newest first."""
        rows = [s for s in self._summaries.values() if query.matches(s)]
        return sorted(rows, key=lambda s: s.started_at, reverse=True)[: query.limit]

    async def get(self, run_id: str) -> RunSummary | None:
        """The run's summary or None."""
        return self._summaries.get(run_id)

    @contextlib.asynccontextmanager
    async def lease(self, run_id: str) -> AsyncIterator[KeptLease]:
        """Hold the run in this store (one process: the holder is always this one)."""
        if run_id in self._leased:
            raise RunBusy(run_id, self._leased[run_id])
        self._leased[run_id] = LeaseHolder.here()
        try:
            yield KeptLease()
        finally:
            del self._leased[run_id]
