"""Runs as Slack lists them: the run store's one truth about each run, joined with its Slack coordinates."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.slack.store import BotStore, RunCoordinates
from orchestrator import RunFailed, RunQuery, RunStore, RunSummary

SURFACE = "slack"


@dataclass(frozen=True, slots=True, kw_only=True)
class SlackRun:
    """One run and where it lives in Slack (a read model: nothing here is stored twice)."""

    run_id: str
    channel: str
    thread_ts: str | None
    requester: str | None
    team: str | None
    task: str
    state: str  # running | finished | failed | cancelled
    final_answer: str | None
    created_at: float


def _join(summary: RunSummary, where: RunCoordinates | None) -> SlackRun | None:
    channel = where.channel if where is not None else None
    if channel is None and summary.conversation is not None and summary.conversation.surface == SURFACE:
        channel = summary.conversation.channel
    if channel is None:
        return None  # not a Slack run (the terminal runner shares the store)
    return SlackRun(
        run_id=summary.run_id,
        channel=channel,
        thread_ts=None if where is None else where.thread_ts,
        requester=summary.requester,
        team=summary.team,
        task=summary.task,
        state=summary.status,
        final_answer=summary.final_answer,
        created_at=summary.started_at,
    )


class RunHistory:
    """Reads runs from the orchestrator's run store, and where they are from the coordinates store."""

    def __init__(self, run_store: RunStore, coordinates: BotStore) -> None:
        self.run_store = run_store
        self.coordinates = coordinates

    async def _joined(self, summaries: list[RunSummary]) -> list[SlackRun]:
        where = await self.coordinates.coordinates(s.run_id for s in summaries)
        return [run for s in summaries if (run := _join(s, where.get(s.run_id))) is not None]

    async def get(self, run_id: str) -> SlackRun | None:
        """One Slack run by id."""
        summary = await self.run_store.get(run_id)
        found = [] if summary is None else await self._joined([summary])
        return found[0] if found else None

    async def recent(self, *, channel: str | None = None, limit: int = 10) -> list[SlackRun]:
        """The latest Slack runs (in one channel, when given), newest first."""
        query = RunQuery(surface=SURFACE, channel=channel, limit=limit)
        return await self._joined(await self.run_store.find(query))

    async def in_thread(self, channel: str, thread_ts: str) -> SlackRun | None:
        """The latest run posting into this thread."""
        run_id = await self.coordinates.run_in_thread(channel, thread_ts)
        return None if run_id is None else await self.get(run_id)

    async def left_running(self) -> list[SlackRun]:
        """Slack runs still marked running (after a restart: those the previous process left behind)."""
        query = RunQuery(status="running", surface=SURFACE, limit=10_000)
        return await self._joined(await self.run_store.find(query))

    async def mark_failed(self, run_id: str, reason: str) -> None:
        """Record in the run store that a run ended without its process (e.g. "the bot restarted")."""
        # The summary's last_seq only moves with summary events; the log knows the last one.
        logged = await self.run_store.events(run_id)
        seq = (logged[-1].seq if logged else 0) + 1
        await self.run_store.append(
            RunFailed(run_id=run_id, seq=seq, at=time.time(), reasons={"run": reason})
        )
