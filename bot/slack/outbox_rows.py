"""The outbox's rows in the bot's database: the persistence half of the outbox, no Slack calls.

A post's row is written before the post is sent, and each attempt is recorded before it is made:
both are retried while the database is away (for the outbox's retry window), and what cannot be
written is not sent (a restart would not know it; a run posting again what it cannot find would
duplicate it). A keyed post (a run's final answer) whose id is saved already is a duplicate,
unless the row is this very post, saved in a commit whose answer was lost. Bookkeeping after a
send (sent, failed, the last error) is best effort: a row left pending with an attempt recorded is
looked up in Slack by its marker before any resend. The newest wanted state of each message is
written by one writer per message, newest last.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError

from bot.batched import Batched
from bot.errors import OutboxError
from bot.slack.outbox_state import (
    DUPLICATE,
    NOT_SAVED,
    PRIORITY_FINAL,
    PRIORITY_THREAD,
    TAKEN,
    MessageRef,
    Post,
    Slot,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from bot.slack.store import OutboxRow, OutboxStore, PendingUpdate

log = logging.getLogger(__name__)

_UNSAVED_KEPT = 10_000
_FAILED = object()  # what `persist` returns for a write that failed for good


class Rows:
    """The outbox's writes and reads of its rows (see the module docstring)."""

    def __init__(
        self,
        store: OutboxStore,
        *,
        clock: Callable[[], float],
        window: Callable[[], float],
        backoff: Callable[[int], float],
    ) -> None:
        self.store = store
        self._clock = clock
        self._window = window  # the outbox's retry window, read at each write (tests change it)
        self._backoff = backoff
        self.stopping = asyncio.Event()  # set when the outbox closes: writes waiting to retry stop
        self.writes: set[asyncio.Task[None]] = set()  # every write under way (awaited at close)
        self._saving: dict[str, asyncio.Task[None]] = {}  # posts' row writes under way, by marker
        self._unsaved: dict[str, None] = {}  # posts whose row could not be written (the latest ones)
        self._status = Batched(store.first_posts)  # a run's saved status and progress posts, batched
        self._progress = Batched(functools.partial(store.first_posts, priority=PRIORITY_THREAD))
        self._update_states: dict[str, PendingUpdate] = {}
        self._update_writers: dict[str, asyncio.Task[None]] = {}

    # -- writes a send depends on ----------------------------------------------------------------

    def save(self, post: Post) -> asyncio.Task[None]:
        """Start writing the post's row; the task fails with `OutboxError` if it cannot be."""
        task = asyncio.create_task(self._save(post))
        self._track(task)
        self._saving[post.marker] = task
        task.add_done_callback(functools.partial(self._saved_or_not, post.marker))
        return task

    @staticmethod
    def row_of(post: Post) -> OutboxRow:
        """The post's new pending row."""
        from bot.slack.store import OutboxRow

        root = post.root
        return OutboxRow(
            id=post.marker,
            seq=post.seq,
            channel=post.ref.channel,
            kwargs=post.kwargs,
            root_id=root.marker if root is not None and root.known_ts is None else None,
            thread_ts=root.known_ts if root is not None else None,
            priority=post.priority,
            run_id=post.run_id,
            status="pending",
            attempts=0,
            ts=None,
        )

    async def save_within(self, conn: AsyncConnection, post: Post) -> bool:
        """The post's row inside `conn`'s transaction; False when its key's row exists already.

        Under a savepoint, so a collision leaves the transaction (a run's end) to commit without it.
        Any other failure fails the transaction: neither the change nor its post is stored.
        """
        try:
            async with conn.begin_nested():
                await self.store.save(self.row_of(post), conn)
        except IntegrityError:
            if not await self.store.exists(post.marker, conn):
                raise
            return False
        return True

    async def _save(self, post: Post) -> None:
        row = self.row_of(post)
        try:
            saved = await self.persist("save", row)
        except IntegrityError:  # its id is saved: this post, if a lost commit answer hid it, or another's
            saved = await self.persist("claim", row.id)
            if saved is False:
                raise OutboxError(
                    "a post of this key was saved already", method="chat.postMessage", error=DUPLICATE
                ) from None
        if saved is _FAILED:
            raise OutboxError(
                "the post could not be saved (the database was away), so it was not sent",
                method="chat.postMessage",
                error=NOT_SAVED,
            )

    async def claim_attempt(self, marker: str, thread: str | None, at: float) -> None:
        """Record the attempt before the send (unrecorded, a restart would re-send it unlooked-up),
        on a row still this process's (else the process a janitor gave it to sends it)."""
        mine = await self.persist("attempt", marker, thread_ts=thread, next_attempt_at=at)
        if mine is _FAILED:
            raise OutboxError(
                "the post's attempt could not be recorded, so it was not sent",
                method="chat.postMessage",
                error=NOT_SAVED,
            )
        if mine is False:
            raise OutboxError(
                "the post's row was given to another process", method="chat.postMessage", error=TAKEN
            )

    async def persist(self, what: str, *args: Any, **kwargs: Any) -> Any:
        """A write a send depends on, retried with backoff for the retry window (not once stopping):
        its result, or `_FAILED`. A collision (`IntegrityError`) is an answer, not retried."""
        give_up_at = self._clock() + self._window()
        attempt = 0
        while True:
            try:
                return await getattr(self.store, what)(*args, **kwargs)
            except IntegrityError:
                raise
            except Exception as exc:
                if self.stopping.is_set() or self._clock() >= give_up_at:
                    log.error("outbox store: %s failed for good: %r", what, exc)
                    return _FAILED
                if attempt == 0:
                    log.warning("outbox store: %s failed (%r); retrying while it is away", what, exc)
            attempt += 1
            with contextlib.suppress(TimeoutError):
                delay = min(self._backoff(attempt), max(give_up_at - self._clock(), 0.0))
                await asyncio.wait_for(self.stopping.wait(), delay)

    async def saved(self, refs: Sequence[MessageRef]) -> bool:
        """Whether the rows of these posts are written (waiting for writes under way)."""
        markers = [r.marker for r in refs if r.marker is not None]
        await asyncio.gather(*(self._saving[m] for m in markers if m in self._saving), return_exceptions=True)
        return not any(m in self._unsaved for m in markers)

    def _saved_or_not(self, marker: str, task: asyncio.Task[None]) -> None:
        self._saving.pop(marker, None)
        error = None if task.cancelled() else task.exception()
        if isinstance(error, OutboxError) and error.error == DUPLICATE:
            return  # saved, by whoever posts it
        if task.cancelled() or error is not None:
            self._unsaved[marker] = None
            if len(self._unsaved) > _UNSAVED_KEPT:
                self._unsaved.pop(next(iter(self._unsaved)))

    # -- bookkeeping -----------------------------------------------------------------------------

    async def note(self, what: str, *args: Any, **kwargs: Any) -> None:
        """A bookkeeping write (sent, failed, an error); a failing database must not stop delivery."""
        try:
            await getattr(self.store, what)(*args, **kwargs)
        except Exception:
            log.exception("outbox store: %s failed", what)

    def note_soon(self, what: str, *args: Any) -> None:
        """`note`, in a task of its own (kept until written, awaited at close)."""
        self._track(asyncio.ensure_future(self.note(what, *args)))

    def wanted(self, slot: Slot, ref: MessageRef) -> None:
        """Save the message's newest wanted state (one writer per message, newest state last)."""
        from bot.slack.store import PendingUpdate

        if ref.known_ts is not None:
            row_id = f"u:{ref.channel}:{ref.known_ts}"
        elif ref.marker is not None:
            row_id = f"u:{ref.marker}"
        else:
            return
        slot.row_ids.add(row_id)
        self._update_states[row_id] = PendingUpdate(
            id=row_id,
            channel=ref.channel,
            ts=ref.known_ts,
            marker=None if ref.known_ts else ref.marker,
            text=slot.text,
            blocks=slot.blocks,
            version=slot.version,
        )
        if row_id not in self._update_writers:
            task = asyncio.create_task(self._write_updates(row_id))
            self._update_writers[row_id] = task
            self._track(task)

    async def _write_updates(self, row_id: str) -> None:
        try:
            while (state := self._update_states.pop(row_id, None)) is not None:
                try:
                    await self.store.save_update(state)
                except Exception:  # still sent; only a restart would miss it
                    log.exception("outbox could not save the wanted state of %s", row_id)
        finally:
            del self._update_writers[row_id]

    async def shown(self, slot: Slot, version: int) -> None:
        """State `version` is on Slack (or never will be): its rows need no resend after a restart."""
        if not slot.row_ids:
            return
        # A save of this state still running would turn the row back to pending after the mark.
        writers = [self._update_writers[i] for i in slot.row_ids if i in self._update_writers]
        if writers:
            await asyncio.gather(*writers, return_exceptions=True)
        await self.note("update_sent", sorted(slot.row_ids), version)

    # -- reads -----------------------------------------------------------------------------------

    async def first_posts(self, run_id: str) -> tuple[OutboxRow | None, OutboxRow | None]:
        """The run's saved status and progress messages, read with those of every other run asking
        meanwhile (the resumes after a restart: one query, not hundreds)."""
        return await asyncio.gather(self._status.get(run_id), self._progress.get(run_id))

    async def final_saved(self, run_id: str) -> bool:
        """Whether a final answer of the run was saved (so it is sent, or was)."""
        return bool(await self.store.first_posts([run_id], priority=PRIORITY_FINAL))

    # -- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop retrying; wait for the writes under way (rows being written are kept)."""
        self.stopping.set()
        if self.writes:
            await asyncio.gather(*self.writes, return_exceptions=True)

    def _track(self, task: asyncio.Task[None]) -> None:
        self.writes.add(task)
        task.add_done_callback(self.writes.discard)


__all__ = ["Rows"]
