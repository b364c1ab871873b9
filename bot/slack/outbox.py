"""The outbox owns every Slack Web API call the bot makes, so pacing is decided in one place.

Why: Slack limits `chat.update` to ~50/min per workspace (Tier 3, shared by every run) and
`chat.postMessage` to ~1/s per channel (docs.slack.dev/apis/web-api/rate-limits). The outbox

- coalesces status updates per message (latest state wins) and sends at most one `chat.update` per
  message every `update_interval` seconds; the newest state is always sent eventually;
- paces posts per channel (`channel_interval`) and keeps a token bucket per method sized to its
  tier, shared by every run;
- on HTTP 429 backs off that method for everyone for `Retry-After` seconds (Slack's limits are per
  method, so a throttled `chat.update` does not stall `views.open` for a button click);
- retries without ever duplicating a post: Slack has no idempotency key, so each post carries a
  marker in message `metadata`; after an ambiguous failure (timeout, 5xx, dropped connection after
  sending) the outbox looks for the marker (`conversations.replies` for thread replies,
  `conversations.history` for channel posts) and only re-sends when the message is not there. If the
  lookup itself fails the post is *not* retried and its `MessageRef` fails with `OutboxError`:
  a missing message is visible and reported, a duplicate approval request is not acceptable.

Posts in one channel go out one at a time, highest `priority` first, but never out of order within
a thread; a reply waits for its root's `ts`. `ephemeral()` and `call()` (e.g. `views.open`, whose
`trigger_id` expires after 3 s) do not queue behind posts: they only pass their method's budget.

Nothing lost, nothing twice: with an `OutboxStore` every post is written to the bot's database
before it is sent (the transactional outbox; `bot.slack.outbox_rows` keeps the rows, retried while
the database is away, and a post it cannot save is not sent) and marked sent once Slack answered;
a keyed post (a run's final answer) saved already is not sent again; `start()` sends
what a previous process left pending, looking up first (by marker) any post that may already have
reached Slack. A post Slack refuses as too long or with invalid blocks that has no buttons (a final
answer) is sent as several plain-text messages instead. A 429 never counts as a failed attempt.
Every give-up is logged with the run and the reason and passed to `on_give_up` listeners; a post's
`MessageRef.ts()` raises `OutboxError` then too.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import OutboxError
from bot.slack.outbox_budget import Budgets, classify
from bot.slack.outbox_rows import Rows
from bot.slack.outbox_state import (
    DUPLICATE,
    NOT_SAVED,
    PRIORITY_APPROVAL,
    PRIORITY_FINAL,
    PRIORITY_STATUS,
    PRIORITY_THREAD,
    TAKEN,
    GiveUp,
    MessageRef,
    OutboxStats,
    Post,
    Slot,
    next_post,
    rekey_slots,
    slot_key,
)

if TYPE_CHECKING:
    from bot.slack.store import OutboxRow, OutboxStore

__all__ = [
    "DUPLICATE",
    "NOT_SAVED",
    "PRIORITY_APPROVAL",
    "PRIORITY_FINAL",
    "PRIORITY_STATUS",
    "PRIORITY_THREAD",
    "GiveUp",
    "MessageRef",
    "Outbox",
    "OutboxStats",
]

log = logging.getLogger(__name__)

_NOT_MINE = frozenset({DUPLICATE, TAKEN})  # not sent because another process sends it: no give-up
MARKER_EVENT = "massgen_outbox"  # metadata event_type carrying the post's client-generated id
_MAX_ATTEMPTS = 5  # of an interactive call (`call`: a views.open's trigger lasts 3 s anyway)
# Posts and updates are retried for a window, not a number of attempts: a Slack outage of minutes
# delays them, it does not lose them. The backoff doubles up to its cap, with jitter, and never
# comes before Slack's Retry-After (429s, and 503s during an incident).
RETRY_WINDOW = 900.0
RETRY_MAX_DELAY = 30.0
# Refusals a text-only post survives by being re-sent as plain-text pieces.
_SPLIT_ON = frozenset({"msg_too_long", "invalid_blocks", "msg_blocks_too_long", "invalid_arguments"})
SPLIT_CHARS = 3_900  # per piece: under the 4,000 characters Slack shows of a top-level text


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
        # The outbox does its own retries; the SDK's default connection-error retry would resend
        # a chat.postMessage whose request already reached Slack, i.e. post it twice.
        self._client = copy.copy(client)  # same token, base_url, session, proxy, ssl, team_id
        self._client.retry_handlers = []
        if call_timeout is not None:
            self._client.timeout = call_timeout  # type: ignore[assignment]  # annotated int, used as float
        self._rows = (
            None
            if store is None
            else Rows(store, clock=clock, window=lambda: self.retry_window, backoff=self._backoff)
        )
        self._resumed: dict[str, MessageRef] = {}  # posts a previous process saved, by id, once resumed
        self._keyed: dict[str, MessageRef] = {}  # posts with a key, until delivered or refused
        self.on_give_up: list[Callable[[GiveUp], None]] = []
        self.update_interval = update_interval
        self.channel_interval = channel_interval
        self.retry_window = retry_window
        self.retry_max_delay = retry_max_delay
        self._clock = clock
        per_window = {2: tier2_per_minute, 3: tier3_per_minute, 4: tier4_per_minute, 5: tier4_per_minute}
        self._budgets = Budgets(per_window, budget_window, posts_per_minute=posts_per_minute)
        self._posts: dict[str, list[Post]] = {}
        self._posting: set[str] = set()
        self._channel_next: dict[str, float] = {}
        self._slots: dict[object, Slot] = {}
        self._version = 0
        self._seq = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._idle = asyncio.Condition()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self.stats = OutboxStats()

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the dispatcher task, after queueing what a previous process left unsent."""
        if self._rows is not None and self._worker is None:
            await self._resume(self._rows.store)
        if self._worker is None:
            self._worker = asyncio.create_task(self._run(), name="outbox")
            self._worker.add_done_callback(_report_crash)

    async def close(self, *, drain: bool = True, timeout: float = 10.0) -> None:  # noqa: ASYNC109 - the drain deadline
        """Stop; with `drain`, first send what is queued (up to `timeout` seconds)."""
        if drain and self._worker is not None:
            try:
                async with asyncio.timeout(timeout):
                    await self.flush()
            except TimeoutError:
                log.warning("outbox closed with %d posts and %d updates unsent", *self._backlog())
        self._closed = True
        if self._rows is not None:  # rows being written are kept: the next process sends them
            await self._rows.close()
        for task in [*self._tasks, *([self._worker] if self._worker else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, *([self._worker] if self._worker else []), return_exceptions=True)
        self._worker = None
        kept = " (kept: sent after a restart)" if self._rows is not None else ""
        for queue in self._posts.values():
            for post in queue:
                post.ref._fail(
                    OutboxError(
                        f"outbox closed before the message was posted{kept}", method="chat.postMessage"
                    )
                )
        if not kept and (lost := sum(len(q) for q in self._posts.values())):
            log.warning("outbox closed without a store: %d posts lost", lost)
        self._posts.clear()

    async def flush(self) -> None:
        """Return once everything queued so far has been sent (or has finally failed)."""
        async with self._idle:
            await self._idle.wait_for(lambda: self._backlog() == (0, 0))

    def _backlog(self) -> tuple[int, int]:
        posts = sum(len(q) for q in self._posts.values()) + len(self._posting)
        updates = sum(1 for s in self._slots.values() if (s.dirty or s.in_flight) and not s.ref.failed)
        return posts, updates

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
        if once is not None and (queued := self._keyed.get(once)) is not None:
            return queued  # the same post, still on its way
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
        ref = MessageRef(channel, marker=marker)
        if once is not None:
            self._keyed[once] = ref
        self._seq += 1
        post = Post(ref, kwargs, root, priority, self._seq, marker, run_id=run_id, once=once)
        if self._rows is not None:
            post.saving = self._rows.save(post)
        self._posts.setdefault(channel, []).append(post)
        self._wake.set()
        return ref

    # -- persistence -----------------------------------------------------------------------------

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
            self._slots[slot_key(target)].row_ids.add(state.id)
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
        self._posts.setdefault(row.channel, []).append(post)
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
        self._wake.set()
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
            self._wake.set()
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
        slot = self._slots.setdefault(slot_key(ref), Slot(ref))
        self._version += 1
        slot.version = self._version
        if slot.dirty:
            self.stats.coalesced_updates += 1
        else:
            slot.dirty, slot.dirty_since = True, self._clock()
        slot.text, slot.blocks = text, blocks
        if self._rows is not None:
            self._rows.wanted(slot, ref)
        self._wake.set()

    def set_share(self, share: float) -> None:
        """This process's part of the workspace's Slack budget (1 / the live processes of the app):
        every method's rate and the pace per channel are that share of Slack's."""
        self._budgets.set_share(share, self._clock())

    @property
    def share(self) -> float:
        return self._budgets.share

    def _channel_pace(self) -> float:
        return self.channel_interval / self._budgets.share

    def hasten(self, ref: MessageRef, priority: int) -> None:
        """Raise a still-queued post to at least `priority`, behind posts hastened earlier (no-op once sent).

        A run that ends before its status message went out hastens it, so in a busy channel roots go
        out in the order their runs finish and each final answer (which waits for its root) follows.
        """
        for post in self._posts.get(ref.channel, []):
            if post.ref is ref and post.priority < priority:
                self._seq += 1
                post.priority, post.seq = priority, self._seq
                self._wake.set()

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
        for attempt in range(_MAX_ATTEMPTS):
            await self._gate(method)
            try:
                return await self._send(method, kwargs)
            except Exception as exc:  # classified: unknown kinds are fatal
                kind, retry_after = classify(exc)
                if kind == "fatal" or (kind == "ambiguous" and method == "chat.postMessage"):
                    raise OutboxError(
                        f"{method} failed: {exc}", method=method, error=_error_code(exc)
                    ) from exc
                self._note_retry(method, kind, retry_after, attempt)
        raise OutboxError(f"{method} failed after {_MAX_ATTEMPTS} attempts", method=method)

    # -- budgets ---------------------------------------------------------------------------------

    async def _gate(self, method: str) -> None:
        """Wait for the method's budget and take one token (sleeping is the pacing itself)."""
        delay = self._budgets.wait_time(method, self._clock())
        while delay > 0:
            await asyncio.sleep(delay)
            delay = self._budgets.wait_time(method, self._clock())
        self._budgets.take(method, self._clock())

    async def _send(self, method: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """One Web API call; the SDK's own method when it has one (read methods take form/query
        parameters, not JSON bodies), else a JSON `api_call`."""
        self.stats.calls_by_method[method] += 1
        sdk_method = getattr(self._client, method.replace(".", "_"), None)
        if callable(sdk_method):
            response = await sdk_method(**kwargs)
        else:
            response = await self._client.api_call(method, json=kwargs)
        return dict(response.data) if isinstance(response.data, dict) else {}

    def _backoff(self, attempt: int) -> float:
        """Seconds before try `attempt + 1`: doubling from 0.25 s up to `retry_max_delay`, ±20% jitter."""
        return min(0.25 * 2.0 ** min(attempt, 16), self.retry_max_delay) * random.uniform(0.8, 1.2)  # noqa: S311

    def _note_retry(self, method: str, kind: str, retry_after: float | None, attempt: int) -> None:
        """Record a retryable failure; a 429 pauses `method` for every caller."""
        self.stats.retries += 1
        now = self._clock()
        if kind == "ratelimited":
            self.stats.rate_limited += 1
            pause = retry_after if retry_after is not None else 1.0
        else:
            pause = max(self._backoff(attempt), retry_after or 0.0)
        self._budgets.back_off(method, now + pause)
        log.info("slack %s: %s, retrying in %.2fs", method, kind, pause)

    # -- dispatcher ------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            delay = self._dispatch(self._clock())
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
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
        for channel, queue in self._posts.items():
            if channel in self._posting or not queue:
                continue
            post, orphans = next_post(queue)
            for orphan in orphans:
                orphan.ref._fail(OutboxError("thread root was never posted", method="chat.postMessage"))
                self._give_up(orphan.marker, channel, orphan.run_id, "its thread root was never posted", None)
            if post is None:
                continue
            wait = max(
                self._channel_next.get(channel, 0.0) - now, self._budgets.wait_time("chat.postMessage", now)
            )
            if wait > 0:
                soonest = wait if soonest is None else min(soonest, wait)
                continue
            queue.remove(post)
            self._posting.add(channel)
            self._spawn(self._deliver_post(post))
        return soonest

    def _dispatch_updates(self, now: float) -> float | None:
        rekey_slots(self._slots)
        ready = sorted(
            (s for s in self._slots.values() if s.dirty and not s.in_flight and s.ref.known_ts is not None),
            key=lambda s: s.dirty_since,
        )
        soonest: float | None = None
        for slot in ready:
            wait = slot.last_sent + self.update_interval - now
            wait = max(wait, self._budgets.wait_time("chat.update", now))
            if wait > 0:
                soonest = wait if soonest is None else min(soonest, wait)
                continue
            self._budgets.take("chat.update", now)
            slot.in_flight, slot.dirty, slot.last_sent = True, False, now
            self._spawn(self._deliver_update(slot, slot.text, slot.blocks, slot.version))
        return soonest

    async def _finished(self) -> None:
        self._wake.set()
        async with self._idle:
            self._idle.notify_all()

    # -- sending ---------------------------------------------------------------------------------

    async def _deliver_update(
        self, slot: Slot, text: str, blocks: list[dict[str, Any]] | None, version: int
    ) -> None:
        kwargs: dict[str, Any] = {"channel": slot.ref.channel, "ts": slot.ref.known_ts, "text": text}
        if blocks is not None:
            kwargs["blocks"] = blocks
        try:
            await self._send("chat.update", kwargs)
            slot.failures = slot.rate_limited = 0
            slot.failing_since = None
            await self._mark_shown(slot, version)
        except Exception as exc:  # an update is idempotent, so retry is safe
            kind, retry_after = classify(exc)
            if kind == "ratelimited":  # waited out, not a failed attempt
                slot.rate_limited += 1
            else:
                slot.failures += 1
            if slot.failing_since is None:
                slot.failing_since = self._clock()
            if kind == "fatal" or self._clock() - slot.failing_since > self.retry_window:
                self.stats.dropped_updates += 1
                log.warning("chat.update of %r given up: %s", slot.ref, _error_code(exc) or exc)
                await self._mark_shown(slot, version)
            else:
                self._note_retry("chat.update", kind, retry_after, slot.failures)
                if not slot.dirty:  # nothing newer arrived meanwhile: resend this state
                    slot.dirty, slot.text, slot.blocks = True, text, blocks
                slot.last_sent = float("-inf")
        finally:
            slot.in_flight = False
            await self._finished()

    async def _mark_shown(self, slot: Slot, version: int) -> None:
        """State `version` is on Slack (or never will be): its rows need no resend after a restart."""
        if self._rows is not None:
            await self._rows.shown(slot, version)

    async def _deliver_post(self, post: Post) -> None:
        channel = post.ref.channel
        try:
            if post.saving is not None:
                await post.saving  # saved before sent: a crash from here on loses nothing
            ts = await self._post_once(post)
            if self._rows is not None:
                await self._rows.note("sent", post.marker, ts)
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
            self._posting.discard(channel)
            if post.once is not None:
                self._keyed.pop(post.once, None)
            await self._finished()

    async def _post_once(self, post: Post) -> str:
        """Send a post, retrying only in ways that cannot duplicate it; return its ts."""
        thread = post.root.known_ts if post.root is not None else None
        if thread is not None:
            post.kwargs["thread_ts"] = thread
        try:
            return await self._send_post(
                post.ref.channel, post.kwargs, post.marker, thread, post.maybe_sent, True
            )
        except OutboxError as exc:
            if exc.error not in _SPLIT_ON or _has_actions(post.kwargs.get("blocks")):
                raise
            log.warning("post %s refused (%s): sending it as plain-text pieces", post.marker, exc.error)
            return await self._post_pieces(post, thread)

    async def _post_pieces(self, post: Post, thread: str | None) -> str:
        """A text-only post Slack refused, as several plain-text messages (the first one's ts)."""
        channel, first = post.ref.channel, ""
        pieces = split_text(_full_text(post.kwargs))
        for i, piece in enumerate(pieces):
            marker = f"{post.marker}.{i}"
            kwargs: dict[str, Any] = {
                "channel": channel,
                "text": piece if len(pieces) == 1 else f"({i + 1}/{len(pieces)}) {piece}",
                "unfurl_links": False,
                "unfurl_media": False,
                "metadata": {"event_type": MARKER_EVENT, "event_payload": {"id": marker}},
            }
            in_thread = thread or first or None
            if in_thread:
                kwargs["thread_ts"] = in_thread
            ts = await self._send_post(channel, kwargs, marker, in_thread, post.maybe_sent, False)
            first = first or ts
        self.stats.split_posts += 1
        return first

    async def _send_post(
        self,
        channel: str,
        kwargs: dict[str, Any],
        marker: str,
        thread: str | None,
        maybe_sent: bool,
        whole: bool,
    ) -> str:
        """One message: paced, retried on 429/5xx/timeouts, looked up by marker when ambiguous.

        `whole`: the post itself (its row counts the attempt), not a piece of a split one.
        """
        oldest = f"{time.time() - 600:.6f}"  # Slack ts is wall-clock seconds
        give_up_at = self._clock() + self.retry_window
        if maybe_sent and (found := await self._look_up(channel, marker, thread, oldest, give_up_at)):
            self.stats.duplicates_avoided += 1
            return found
        attempt = 0
        while True:
            delay = self._channel_next.get(channel, 0.0) - self._clock()
            while delay > 0:  # pacing, not waiting for a condition
                await asyncio.sleep(delay)
                delay = self._channel_next.get(channel, 0.0) - self._clock()
            await self._gate("chat.postMessage")
            self._channel_next[channel] = self._clock() + self._channel_pace()
            if whole and self._rows is not None:
                await self._rows.claim_attempt(marker, thread, time.time())
            try:
                return str((await self._send("chat.postMessage", kwargs))["ts"])
            except Exception as exc:
                kind, retry_after = classify(exc)
                if kind == "fatal":
                    raise OutboxError(
                        f"post failed: {exc}", method="chat.postMessage", error=_error_code(exc)
                    ) from exc
                if kind == "ambiguous" and (
                    found := await self._look_up(channel, marker, thread, oldest, give_up_at)
                ):
                    self.stats.duplicates_avoided += 1
                    return found
                if whole and self._rows is not None:
                    await self._rows.note("note_error", marker, f"{kind}: {_error_code(exc) or exc!r}")
                if self._clock() >= give_up_at:
                    raise OutboxError(
                        f"post failed for {self.retry_window:g} s ({kind})",
                        method="chat.postMessage",
                        error=_error_code(exc),
                    ) from exc
                attempt += kind != "ratelimited"
                self._note_retry("chat.postMessage", kind, retry_after, attempt)

    async def _look_up(
        self, channel: str, marker: str, thread: str | None, oldest: str, give_up_at: float
    ) -> str:
        """`_find_posted`, its own failures retried until `give_up_at`: after an ambiguous answer
        the post is re-sent only once Slack said it is not there, never on a guess."""
        attempt = 0
        while True:
            try:
                return await self._find_posted(channel, marker, thread, oldest)
            except OutboxError:
                if self._clock() >= give_up_at:
                    raise
            attempt += 1
            await asyncio.sleep(min(self._backoff(attempt), max(give_up_at - self._clock(), 0.0)))

    async def _read_history(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """A history read; in a public channel the bot posted to uninvited (`chat:write.public`),
        Slack answers `not_in_channel`: join it (`channels:join`) and read again."""
        await self._gate(method)
        try:
            return await self._send(method, args)
        except SlackApiError as exc:
            if _error_code(exc) != "not_in_channel":
                raise
        log.info("joining %s to look up a post whose answer was lost", args["channel"])
        await self._gate("conversations.join")
        await self._send("conversations.join", {"channel": args["channel"]})
        await self._gate(method)
        return await self._send(method, args)

    async def _find_posted(self, channel: str, marker: str, thread: str | None, oldest: str) -> str:
        """The ts of a post that may have reached Slack, found by its marker; "" if surely absent."""
        args: dict[str, Any]
        try:
            if thread is not None:
                method, args = "conversations.replies", {"ts": thread, "limit": 1000}
            else:
                method, args = "conversations.history", {"oldest": oldest, "limit": 200}
            data = await self._read_history(
                method, {"channel": channel, "include_all_metadata": True, **args}
            )
        except Exception as exc:  # any failure here means "unknown"
            raise OutboxError(
                "post outcome unknown and not retried (it may have been delivered)",
                method="chat.postMessage",
                error=_error_code(exc),
            ) from exc
        for message in data.get("messages", []):
            payload = (message.get("metadata") or {}).get("event_payload") or {}
            if payload.get("id") == marker:
                return str(message["ts"])
        return ""


def split_text(text: str, limit: int = SPLIT_CHARS) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut at line ends (else spaces) where possible."""
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = text.rfind(" ", 0, limit)
        if cut < limit // 2:
            cut = limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip("\n")
    return [*pieces, text] if text or not pieces else pieces


def _has_actions(blocks: Any) -> bool:
    """Whether a message has buttons (an approval): those are never re-sent as bare text."""
    return isinstance(blocks, list) and any(
        isinstance(b, dict) and b.get("type") == "actions" for b in blocks
    )


def _full_text(kwargs: dict[str, Any]) -> str:
    """Everything a message shows as text: its blocks' texts, else the top-level text."""
    texts: list[str] = []
    for block in kwargs.get("blocks") or []:
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), dict):
            texts.append(str(block["text"].get("text", "")))
        elif isinstance(block.get("text"), str):  # markdown blocks
            texts.append(block["text"])
        texts += [
            str(e.get("text", "")) for e in block.get("elements") or [] if isinstance(e, dict) and "text" in e
        ]
    return "\n\n".join(t for t in texts if t) or str(kwargs.get("text", ""))


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("outbox dispatcher stopped", exc_info=task.exception())


def _error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    try:
        return None if response is None else str(response.get("error"))
    except (AttributeError, TypeError):
        return None
