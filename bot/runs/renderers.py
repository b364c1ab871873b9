"""A run's renderer, for a new run or one a worker takes up again: over the status message a
previous process posted when there is one, with the progress message it showed.

A step runs again after a crash, and a crash can come at any point of a start: after the run's
coordinates were recorded, or its status message saved or posted, but before the ts was written.
Each is reused here, so a run never shows two status messages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.batched import Batched
from bot.errors import OutboxError
from bot.runs.blocks import status_blocks
from bot.runs.presenter import RunRenderer
from bot.runs.request import RunRequest
from bot.slack.outbox import MessageRef, Outbox
from bot.slack.store import BotStore
from orchestrator import RunEvent, RunView

if TYPE_CHECKING:
    from bot.slack.store import OutboxRow, RunCoordinates

Spawn = Callable[[Coroutine[Any, Any, Any], str], asyncio.Task[Any]]


@dataclass(frozen=True, slots=True)
class Saved:
    """What Slack-side state a run has, read in one go: where it lives, its status and progress posts."""

    where: RunCoordinates | None
    status: OutboxRow | None
    progress: OutboxRow | None


class Renderers:
    """Builds each run's `RunRenderer` from what is saved of it in Slack and in the bot's store."""

    def __init__(
        self,
        *,
        outbox: Outbox,
        store: BotStore,
        spawn: Spawn,
        clock: Callable[[], float] = time.time,
        broadcast_final: bool = False,
        progress_after: float = 20.0,
    ) -> None:
        self._outbox = outbox
        self._store = store
        self._spawn = spawn
        self._clock = clock
        self._broadcast = broadcast_final
        self._progress_after = progress_after
        # Looked up for many resumes at once after a restart (one query each, not one per run).
        self._coordinates = Batched(store.coordinates)

    async def saved(self, run_id: str) -> Saved:
        """The run's coordinates and its saved status and progress posts, read concurrently."""
        where, (status, progress) = await asyncio.gather(
            self._coordinates.get(run_id), self._outbox.first_posts(run_id)
        )
        return Saved(where, status, progress)

    async def restored(
        self, run_id: str, request: RunRequest, events: list[RunEvent], saved: Saved
    ) -> RunRenderer:
        """A stored run's renderer: its status from the stored events, its progress message as shown."""
        # One fold: the view after each event feeds the progress message, the last one the status.
        views = list(itertools.accumulate(events, RunView.apply, initial=RunView()))
        renderer = await self.renderer_for(run_id, request, views[-1], saved)
        self._restore_progress(renderer, events, views[1:], saved)
        return renderer

    async def renderer_for(
        self, run_id: str, request: RunRequest, view: RunView | None, saved: Saved
    ) -> RunRenderer:
        """The run's renderer: over the status message a previous process posted, else a new one.

        A crash can come at any point of a start: after the run's coordinates were recorded, or
        its status message saved or posted, but before the ts was written. Each is reused.
        """
        where = saved.where
        root = (
            MessageRef.existing(request.channel, where.root_ts)
            if where is not None and where.root_ts
            else self._outbox.root_of(saved.status)  # posted (or saved) before its ts was recorded
        )
        if root is not None:
            initial = view or dataclasses.replace(
                RunView.initial(task=request.task, requester=request.requester, now=self._clock()),
                run_id=run_id,
            )
            renderer = self._renderer(request, root, initial)
        else:
            renderer = self._open(run_id, request, view=view)
        if where is None:
            await self._store.record_run(run_id, request.channel, thread_ts=request.thread_ts)
        if where is None or not where.root_ts:
            self._spawn(self._remember_root(run_id, renderer), f"root-ts:{run_id}")
        return renderer

    def _restore_progress(
        self, renderer: RunRenderer, events: list[RunEvent], views: list[RunView], saved: Saved
    ) -> None:
        """The progress message an earlier segment posted is edited on, with what it showed.

        `views`: the run's view after each of `events`.
        """
        for event, view in zip(events, views, strict=True):
            renderer.progress.add(event, view)
        renderer.progress_message = self._outbox.root_of(saved.progress)

    def _open(self, run_id: str, request: RunRequest, *, view: RunView | None = None) -> RunRenderer:
        """Post the status message at once (the ts arrives later) and build the run's renderer."""
        if view is None:
            initial = RunView.initial(task=request.task, requester=request.requester, now=self._clock())
            view = dataclasses.replace(initial, run_id=run_id)
        text, blocks = status_blocks(view, now=self._clock(), used=request.used())
        root = self._outbox.post(
            request.channel,
            text=text,
            blocks=blocks,
            thread=request.thread_ts,
            run_id=run_id,
            once=f"status:{run_id}",  # a step run again while the first is unsaved posts no second
        )
        return self._renderer(request, root, view)

    def _renderer(self, request: RunRequest, root: MessageRef, view: RunView) -> RunRenderer:
        # A follow-up's status message sits in its parent's thread, so its posts go there too.
        thread: MessageRef | str = request.thread_ts or root
        return RunRenderer(
            self._outbox,
            request.channel,
            root,
            thread,
            view=view,
            clock=self._clock,
            broadcast=self._broadcast,
            progress_after=self._progress_after,
            used=request.used(),
        )

    async def _remember_root(self, run_id: str, renderer: RunRenderer) -> None:
        try:
            ts = await renderer.root.ts()
        except OutboxError:
            return  # never posted: the executor's root watcher tells the requester
        renderer.show_progress()  # the thread exists now: what the run did so far can be shown
        await self._store.set_root(run_id, ts)


__all__ = ["Renderers", "Saved"]
