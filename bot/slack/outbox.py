"""The outbox owns every Slack Web API call the bot makes, so pacing is decided in one place.

Why: Slack limits `chat.update` to ~50/min per workspace (Tier 3, shared by every run) and
`chat.postMessage` to ~1/s per channel (docs.slack.dev/apis/web-api/rate-limits). The outbox

- coalesces status updates per message (latest state wins) and sends at most one `chat.update` per
  message every `update_interval` seconds; the newest state is always sent eventually;
- paces posts per channel (`channel_interval`) and keeps a token bucket per method sized to its
  tier, shared by every run;
- on HTTP 429 backs off that method for everyone for `Retry-After` seconds (Slack's limits are per
  method, so a throttled `chat.update` does not stall `views.open` for a button click);
- retries without ever duplicating a post (`bot.slack.outbox_send`: each post carries a marker that
  is looked up after an ambiguous failure; a post that may be on Slack is never sent on a guess).

Posts in one channel go out one at a time, highest `priority` first, but never out of order within
a thread; a reply waits for its root's `ts`. `ephemeral()` and `call()` (e.g. `views.open`, whose
`trigger_id` expires after 3 s) do not queue behind posts: they only pass their method's budget.

Nothing lost, nothing twice: with an `OutboxStore` every post is written to the bot's database
before it is sent (the transactional outbox; `bot.slack.outbox_rows` keeps the rows, retried while
the database is away, and a post it cannot save is not sent) and marked sent once Slack answered;
a keyed post (a run's final answer) saved already is not sent again; `start()` sends
what a previous process left pending, looking up first (by marker) any post that may already have
reached Slack. A post Slack refuses as too long or with invalid blocks that has no buttons (a final
answer) is sent as several plain-text messages instead. Every give-up is logged with the run and
the reason and passed to `on_give_up` listeners; a post's `MessageRef.ts()` raises `OutboxError`
then too.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bot.errors import OutboxError
from bot.slack.outbox_budget import Budgets
from bot.slack.outbox_dispatch import Dispatcher
from bot.slack.outbox_rows import Rows
from bot.slack.outbox_send import MARKER_EVENT, RETRY_MAX_DELAY, RETRY_WINDOW, Sender, split_text
from bot.slack.outbox_state import (
    DUPLICATE,
    NOT_SAVED,
    PRIORITY_APPROVAL,
    PRIORITY_FINAL,
    PRIORITY_STATUS,
    PRIORITY_THREAD,
    GiveUp,
    MessageRef,
    OutboxStats,
    Post,
    Slot,
    slot_key,
)

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient
    from sqlalchemy.ext.asyncio import AsyncConnection

    from bot.slack.store import OutboxRow, OutboxStore

__all__ = [
    "DUPLICATE",
    "MARKER_EVENT",
    "NOT_SAVED",
    "PRIORITY_APPROVAL",
    "PRIORITY_FINAL",
    "PRIORITY_STATUS",
    "PRIORITY_THREAD",
    "GiveUp",
    "MessageRef",
    "Outbox",
    "OutboxStats",
    "split_text",
]

log = logging.getLogger(__name__)


class Outbox:
    """Rate-limited, coalescing owner of every Slack call (see the module docstring)."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        update_interval: float = 2.0,
        channel_interval: float = 1.0,
        tier3_per_minute: int = 45,
        tier2_per_minute: int = 18,
        tier4_per_minute: int = 90,
        posts_per_minute: int = 240,
        budget_window: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        store: OutboxStore | None = None,
        call_timeout: float | None = None,
        retry_window: float = RETRY_WINDOW,
        retry_max_delay: float = RETRY_MAX_DELAY,
    ) -> None:
        self.stats = OutboxStats()
        per_window = {2: tier2_per_minute, 3: tier3_per_minute, 4: tier4_per_minute, 5: tier4_per_minute}
        self._budgets = Budgets(per_window, budget_window, posts_per_minute=posts_per_minute)
        self._sender = Sender(
            client,
            budgets=self._budgets,
            stats=self.stats,
            clock=clock,
            channel_interval=channel_interval,
            call_timeout=call_timeout,
            retry_window=retry_window,
            retry_max_delay=retry_max_delay,
        )
        sender = self._sender
        window = lambda: sender.retry_window  # noqa: E731 - read at each write
        self._rows = (
            None if store is None else Rows(store, clock=clock, window=window, backoff=sender.backoff)
        )
        sender.rows = self._rows
        self._resumed: dict[str, MessageRef] = {}  # posts a previous process saved, by id, once resumed
        self.on_give_up: list[Callable[[GiveUp], None]] = []
        self._clock = clock
        self._queue = Dispatcher(sender, give_up=self._give_up, clock=clock, update_interval=update_interval)
        self._version = 0
        self._seq = 0
        self._closed = False

    @property
    def update_interval(self) -> float:
        """Seconds between two `chat.update`s of one message."""
        return self._queue.update_interval

    @property
    def channel_interval(self) -> float:
        """Seconds between two posts in one channel (this process's share of Slack's pace)."""
        return self._sender.channel_interval

    @property
    def retry_window(self) -> float:
        """Seconds a post or an update is retried before it is given up."""
        return self._sender.retry_window

    @retry_window.setter
    def retry_window(self, seconds: float) -> None:
        self._sender.retry_window = seconds  # the rows' writes read it at each write too

    @property
    def retry_max_delay(self) -> float:
        return self._sender.retry_max_delay

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the dispatcher task, after queueing what a previous process left unsent."""
        if self._rows is not None and not self._queue.running:
            await self._resume(self._rows.store)
        self._queue.start()

    async def close(self, *, drain: bool = True, timeout: float = 10.0) -> None:  # noqa: ASYNC109 - the drain deadline
        """Stop; with `drain`, first send what is queued (up to `timeout` seconds)."""
        if drain and self._queue.running:
            try:
                async with asyncio.timeout(timeout):
                    await self.flush()
            except TimeoutError:
                log.warning("outbox closed with %d posts and %d updates unsent", *self._queue.backlog())
        self._closed = True
        if self._rows is not None:  # rows being written are kept: the next process sends them
            await self._rows.close()
        await self._queue.stop()
        kept = " (kept: sent after a restart)" if self._rows is not None else ""
        for queue in self._queue.posts.values():
            for post in queue:
                post.ref._fail(
                    OutboxError(
                        f"outbox closed before the message was posted{kept}", method="chat.postMessage"
                    )
                )
        if not kept and (lost := sum(len(q) for q in self._queue.posts.values())):
            log.warning("outbox closed without a store: %d posts lost", lost)
        self._queue.posts.clear()

    async def flush(self) -> None:
        """Return once everything queued so far has been sent (or has finally failed)."""
        await self._queue.flush()

    # -- public API ------------------------------------------------------------------------------

    def post(
        self,
        channel: str,
        *,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        thread: MessageRef | str | None = None,
        broadcast: bool = False,
        priority: int = PRIORITY_STATUS,
        run_id: str | None = None,
        key: str | None = None,
        once: str | None = None,
    ) -> MessageRef:
        """Queue a `chat.postMessage` (saved to the store first); the returned ref resolves to its `ts`.

        `key`: the post's id when it must exist once whoever posts it (a run's final answer, which a
        step run again or a second driver may post again): a post of a key saved already, here or
        by another process, is not sent again (its ref fails with `DUPLICATE`). `once`: only while
        the first is on its way (here) is a post queued again under this name the same post (a run's
        status message, when its step runs again before the first one's row could be written).
        """
        if self._closed:
            raise OutboxError("outbox is closed", method="chat.postMessage")
        once = once or key
        if once is not None and (queued := self._queue.keyed.get(once)) is not None:
            return queued  # the same post, still on its way
        post = self.prepare(
            channel, text=text, blocks=blocks, thread=thread, broadcast=broadcast, priority=priority,
            run_id=run_id, key=key, once=once,
        )  # fmt: skip
        if self._rows is not None:
            post.saving = self._rows.save(post)
        return self.enqueue(post)

    def prepare(
        self,
        channel: str,
        *,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        thread: MessageRef | str | None = None,
        broadcast: bool = False,
        priority: int = PRIORITY_STATUS,
        run_id: str | None = None,
        key: str | None = None,
        once: str | None = None,
    ) -> Post:
        """A post as `post` makes it, neither saved nor queued: `save_within`, then `enqueue`."""
        root = MessageRef.existing(channel, thread) if isinstance(thread, str) else thread
        if root is not None and root.channel != channel:
            raise ValueError(f"thread root is in {root.channel}, not {channel}")
        marker = key or uuid.uuid4().hex
        kwargs: dict[str, Any] = {
            "channel": channel,
            "text": text,
            "unfurl_links": False,
            "unfurl_media": False,
        }
        kwargs["metadata"] = {"event_type": MARKER_EVENT, "event_payload": {"id": marker}}
        if blocks is not None:
            kwargs["blocks"] = blocks
        if broadcast:
            kwargs["reply_broadcast"] = True
        self._seq += 1
        return Post(
            MessageRef(channel, marker=marker),
            kwargs,
            root,
            priority,
            self._seq,
            marker,
            run_id=run_id,
            once=once,
        )

    async def save_within(self, conn: AsyncConnection, post: Post) -> bool:
        """Write the post's row in `conn`'s transaction (the state change that implies it commits it);
        False when a row of its key is there already (saved before: it is sent, or was)."""
        return True if self._rows is None else await self._rows.save_within(conn, post)

    def enqueue(self, post: Post) -> MessageRef:
        """Queue a prepared post (its row saved, or being saved: `post.saving`); its ref."""
        if post.once is not None:
            self._queue.keyed[post.once] = post.ref
        self._queue.posts.setdefault(post.ref.channel, []).append(post)
        self._queue.wake.set()
        return post.ref

    # -- persistence -----------------------------------------------------------------------------

    async def saved_post(self, post_id: str) -> OutboxRow | None:
        """The row of a post saved under this id (a keyed post: its key), by any process; None
        when there is none, or no store."""
        return None if self._rows is None else await self._rows.store.row(post_id)

    async def saved(self, refs: Sequence[MessageRef]) -> bool:
        """Whether the rows of these posts are written (waiting for writes under way): a step that
        implies them ends only once they are, else it runs again and queues them again."""
        return True if self._rows is None else await self._rows.saved(refs)

    async def _resume(self, store: OutboxStore) -> None:
        """Queue the posts a previous process saved but did not finish sending."""
        rows = await store.pending()
        self._seq = max(self._seq, await store.last_seq())
        for row in rows:
            self._adopt(row)
        if rows:
            log.info("outbox resumed %d unsent posts", self.stats.resumed_posts)
        states = await store.pending_updates()
        self._version = max([self._version, *(state.version for state in states)])
        for state in states:
            target = (
                MessageRef.existing(state.channel, state.ts)
                if state.ts
                else self._resumed.get(state.marker or "")
            )
            if target is None:  # its post was given up: nothing to update
                await store.update_sent([state.id], state.version)
                continue
            self.update(target, text=state.text, blocks=state.blocks)
            self._queue.slots[slot_key(target)].row_ids.add(state.id)
            self.stats.resumed_updates += 1

    def _adopt(self, row: OutboxRow) -> MessageRef | None:
        """Queue a post a previous (or dead) process saved; one it may have sent is looked up first."""
        refs = self._resumed
        ref = refs[row.id] = MessageRef(row.channel, marker=row.id)
        root = MessageRef.existing(row.channel, row.thread_ts) if row.thread_ts else None
        if row.root_id is not None:
            root = refs.get(row.root_id)
        if row.status == "failed" or (row.root_id is not None and root is None):
            self._give_up(row.id, row.channel, row.run_id, "its thread root was never posted", None)
            return None
        post = Post(ref, row.kwargs, root, row.priority, row.seq, row.id, run_id=row.run_id)
        post.maybe_sent = row.attempts > 0
        self._queue.posts.setdefault(row.channel, []).append(post)
        self.stats.resumed_posts += 1
        return ref

    async def first_posts(self, run_id: str) -> tuple[OutboxRow | None, OutboxRow | None]:
        """The run's saved status message and progress message (for `root_of`), read with those of
        every other run asking meanwhile (the resumes after a restart: one query, not hundreds)."""
        if self._rows is None:
            return None, None
        return await self._rows.first_posts(run_id)

    async def final_saved(self, run_id: str) -> bool:
        """Whether a final answer of the run was saved (so it is sent, or was): never post it twice."""
        return False if self._rows is None else await self._rows.final_saved(run_id)

    def root_of(self, row: OutboxRow | None) -> MessageRef | None:
        """The message a previous process posted (or saved, and this one sends) for a run's `row`.

        A run resumed after a crash or a park keeps its status and progress messages instead of
        posting others: Slack has them, or the resumed backlog posts each exactly once.
        """
        if row is None:
            return None
        if row.ts:
            return MessageRef.existing(row.channel, row.ts)
        if row.id in self._resumed:
            return self._resumed[row.id]
        # Saved by a worker that died before Slack answered (its runs were taken over): send it
        # from here, looked up by its marker first if that worker may have sent it.
        ref = self._adopt(row)
        self._queue.wake.set()
        return ref

    async def take_over(self, owners: Sequence[str]) -> int:
        """Send the posts dead executors saved but never finished (the janitor took their runs)."""
        if self._rows is None or not owners:
            return 0
        adopted = 0
        for row in await self._rows.store.take_over(owners):
            if row.id not in self._resumed and self._adopt(row) is not None:
                adopted += 1
        if adopted:
            log.info("outbox took over %d unsent posts of %s", adopted, ", ".join(owners))
            self._queue.wake.set()
        return adopted

    def _give_up(
        self, post_id: str, channel: str, run_id: str | None, reason: str, error: str | None
    ) -> None:
        """Log a post that will not be delivered, with its run and why, and tell the listeners."""
        self.stats.given_up += 1
        log.warning("slack post %s given up: run=%s channel=%s reason=%s", post_id, run_id, channel, reason)
        if self._rows is not None:
            self._rows.note_soon("failed", post_id, reason)
        event = GiveUp(post_id=post_id, channel=channel, run_id=run_id, reason=reason, error=error)
        for listener in list(self.on_give_up):
            try:
                listener(event)
            except Exception:
                log.exception("outbox give-up listener failed")

    def update(self, ref: MessageRef, *, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        """Set the wanted state of a message; sent coalesced, at most once per `update_interval`."""
        slot = self._queue.slots.setdefault(slot_key(ref), Slot(ref))
        self._version += 1
        slot.version = self._version
        if slot.dirty:
            self.stats.coalesced_updates += 1
        else:
            slot.dirty, slot.dirty_since = True, self._clock()
        slot.text, slot.blocks = text, blocks
        if self._rows is not None:
            self._rows.wanted(slot, ref)
        self._queue.wake.set()

    def set_share(self, share: float) -> None:
        """This process's part of the workspace's Slack budget (1 / the live processes of the app):
        every method's rate and the pace per channel are that share of Slack's."""
        self._budgets.set_share(share, self._clock())

    @property
    def share(self) -> float:
        return self._budgets.share

    def hasten(self, ref: MessageRef, priority: int) -> None:
        """Raise a still-queued post to at least `priority`, behind posts hastened earlier (no-op once sent).

        A run that ends before its status message went out hastens it, so in a busy channel roots go
        out in the order their runs finish and each final answer (which waits for its root) follows.
        """
        for post in self._queue.posts.get(ref.channel, []):
            if post.ref is ref and post.priority < priority:
                self._seq += 1
                post.priority, post.seq = priority, self._seq
                self._queue.wake.set()

    async def ephemeral(
        self,
        channel: str,
        user: str,
        *,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
    ) -> None:
        """`chat.postEphemeral` now, ahead of queued posts (answers to clicks must be fast)."""
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if blocks is not None:
            kwargs["blocks"] = blocks
        if thread_ts is not None:
            kwargs["thread_ts"] = thread_ts
        await self.call("chat.postEphemeral", **kwargs)

    async def call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        """Any other Web API method, through its tier's shared budget and the 429 back-off."""
        return await self._sender.call(method, **kwargs)
