"""The outbox's queues and its one dispatcher task: which post or update may go now.

Posts wait per channel and go out one at a time per channel, highest priority first but never out
of order within a thread (a reply waits for its root's ts), each once the channel's pace and the
`chat.postMessage` budget allow. Each message's wanted state waits in its slot (latest wins) and is
sent at most once per `update_interval`, the oldest wanted first, within the `chat.update` budget.
The dispatcher sleeps until the next one may go or something new arrives (`wake`). Sending itself,
retried and never twice, is the `Sender`'s; what is queued and why is the `Outbox`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from bot.errors import OutboxError
from bot.slack.outbox_send import Sender
from bot.slack.outbox_state import DUPLICATE, TAKEN, MessageRef, Post, Slot, next_post, rekey_slots

log = logging.getLogger(__name__)

_NOT_MINE = frozenset({DUPLICATE, TAKEN})  # not sent because another process sends it: no give-up

# (post id, channel, run id, reason, Slack's error code): a post that will not be delivered.
GiveUpFn = Callable[[str, str, str | None, str, str | None], None]


class Dispatcher:
    """Holds what waits to be sent and hands each post or update to the sender when it may go."""

    def __init__(
        self,
        sender: Sender,
        *,
        give_up: GiveUpFn,
        clock: Callable[[], float] = time.monotonic,
        update_interval: float = 2.0,
    ) -> None:
        self._sender = sender
        self._give_up = give_up
        self._clock = clock
        self.update_interval = update_interval
        self.posts: dict[str, list[Post]] = {}  # per channel, waiting
        self.posting: set[str] = set()  # channels with a post on its way
        self.slots: dict[object, Slot] = {}  # per message, its wanted state
        self.keyed: dict[str, MessageRef] = {}  # posts with a key, until delivered or refused
        self._tasks: set[asyncio.Task[None]] = set()
        self.wake = asyncio.Event()
        self._idle = asyncio.Condition()
        self._worker: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._worker is not None

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.create_task(self._run(), name="outbox")
            self._worker.add_done_callback(_report_crash)

    async def stop(self) -> None:
        """Cancel the dispatcher and every send under way (what is queued stays queued)."""
        for task in [*self._tasks, *([self._worker] if self._worker else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, *([self._worker] if self._worker else []), return_exceptions=True)
        self._worker = None

    async def flush(self) -> None:
        """Return once everything queued so far has been sent (or has finally failed)."""
        async with self._idle:
            await self._idle.wait_for(lambda: self.backlog() == (0, 0))

    def backlog(self) -> tuple[int, int]:
        """Posts and updates not sent yet (queued or on their way)."""
        posts = sum(len(q) for q in self.posts.values()) + len(self.posting)
        updates = sum(1 for s in self.slots.values() if (s.dirty or s.in_flight) and not s.ref.failed)
        return posts, updates

    async def _run(self) -> None:
        while True:
            self.wake.clear()
            delay = self._dispatch(self._clock())
            try:
                async with asyncio.timeout(delay):
                    await self.wake.wait()
            except TimeoutError:
                pass  # a budget or interval opened up

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _dispatch(self, now: float) -> float | None:
        """Start every send that may go now; return seconds until the next may (None: nothing waits)."""
        waits = [self._dispatch_posts(now), self._dispatch_updates(now)]
        pending = [w for w in waits if w is not None]
        return max(min(pending), 0.001) if pending else None

    def _dispatch_posts(self, now: float) -> float | None:
        soonest: float | None = None
        for channel, queue in self.posts.items():
            if channel in self.posting or not queue:
                continue
            post, orphans = next_post(queue)
            for orphan in orphans:
                orphan.ref._fail(OutboxError("thread root was never posted", method="chat.postMessage"))
                self._give_up(orphan.marker, channel, orphan.run_id, "its thread root was never posted", None)
            if post is None:
                continue
            wait = max(
                self._sender.channel_next.get(channel, 0.0) - now,
                self._sender.budgets.wait_time("chat.postMessage", now),
            )
            if wait > 0:
                soonest = wait if soonest is None else min(soonest, wait)
                continue
            queue.remove(post)
            self.posting.add(channel)
            self._spawn(self._deliver_post(post))
        return soonest

    def _dispatch_updates(self, now: float) -> float | None:
        rekey_slots(self.slots)
        ready = sorted(
            (s for s in self.slots.values() if s.dirty and not s.in_flight and s.ref.known_ts is not None),
            key=lambda s: s.dirty_since,
        )
        soonest: float | None = None
        for slot in ready:
            wait = slot.last_sent + self.update_interval - now
            wait = max(wait, self._sender.budgets.wait_time("chat.update", now))
            if wait > 0:
                soonest = wait if soonest is None else min(soonest, wait)
                continue
            self._sender.budgets.take("chat.update", now)
            slot.in_flight, slot.dirty, slot.last_sent = True, False, now
            self._spawn(self._deliver_update(slot, slot.text, slot.blocks, slot.version))
        return soonest

    async def _finished(self) -> None:
        self.wake.set()
        async with self._idle:
            self._idle.notify_all()

    async def _deliver_update(
        self, slot: Slot, text: str, blocks: list[dict[str, Any]] | None, version: int
    ) -> None:
        try:
            await self._sender.update(slot, text, blocks, version)
        finally:
            slot.in_flight = False
            await self._finished()

    async def _deliver_post(self, post: Post) -> None:
        channel = post.ref.channel
        try:
            if post.saving is not None:
                await post.saving  # saved before sent: a crash from here on loses nothing
            ts = await self._sender.post(post)
            if self._sender.rows is not None:
                await self._sender.rows.note("sent", post.marker, ts)
            post.ref._resolve(ts)
        except OutboxError as exc:
            post.ref._fail(exc)
            if exc.error in _NOT_MINE:  # another process posts it: nothing is missing
                log.info("slack post %s not sent here: %s (run %s)", post.marker, exc, post.run_id)
            else:
                self._give_up(post.marker, channel, post.run_id, str(exc), exc.error)
        except Exception as exc:  # a bug must not leave the ref (and flush) waiting forever
            log.exception("outbox post failed unexpectedly")
            post.ref._fail(OutboxError(f"post failed: {exc!r}", method="chat.postMessage"))
            self._give_up(post.marker, channel, post.run_id, f"post failed: {exc!r}", None)
        finally:
            if post.ref.known_ts is None and not post.ref.failed:  # cancelled by close()
                post.ref._fail(OutboxError("outbox closed while posting", method="chat.postMessage"))
            self.posting.discard(channel)
            if post.once is not None:
                self.keyed.pop(post.once, None)
            await self._finished()


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("outbox dispatcher stopped", exc_info=task.exception())


__all__ = ["Dispatcher", "GiveUpFn"]
