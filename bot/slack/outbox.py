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
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import OutboxError
from bot.slack.outbox_budget import Budgets, classify
from bot.slack.outbox_state import MessageRef, OutboxStats, Post, Slot, next_post, rekey_slots, slot_key

__all__ = [
    "PRIORITY_APPROVAL",
    "PRIORITY_FINAL",
    "PRIORITY_STATUS",
    "PRIORITY_THREAD",
    "MessageRef",
    "Outbox",
    "OutboxStats",
]

log = logging.getLogger(__name__)

PRIORITY_STATUS = 0
PRIORITY_THREAD = 5
PRIORITY_APPROVAL = 10
PRIORITY_FINAL = 10
MARKER_EVENT = "massgen_outbox"  # metadata event_type carrying the post's client-generated id
_MAX_ATTEMPTS = 5


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
    ) -> None:
        # The outbox does its own retries; the SDK's default connection-error retry would resend
        # a chat.postMessage whose request already reached Slack, i.e. post it twice.
        self._client = copy.copy(client)  # same token, base_url, session, proxy, ssl, team_id
        self._client.retry_handlers = []
        self.update_interval = update_interval
        self.channel_interval = channel_interval
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
        """Start the dispatcher task."""
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
        for task in [*self._tasks, *([self._worker] if self._worker else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, *([self._worker] if self._worker else []), return_exceptions=True)
        self._worker = None
        for queue in self._posts.values():
            for post in queue:
                post.ref._fail(
                    OutboxError("outbox closed before the message was posted", method="chat.postMessage")
                )
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
    ) -> MessageRef:
        """Queue a `chat.postMessage`; the returned ref resolves to its `ts`."""
        if self._closed:
            raise OutboxError("outbox is closed", method="chat.postMessage")
        root = MessageRef.existing(channel, thread) if isinstance(thread, str) else thread
        if root is not None and root.channel != channel:
            raise ValueError(f"thread root is in {root.channel}, not {channel}")
        marker = uuid.uuid4().hex
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
        ref = MessageRef(channel)
        self._seq += 1
        self._posts.setdefault(channel, []).append(Post(ref, kwargs, root, priority, self._seq, marker))
        self._wake.set()
        return ref

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

    def _note_retry(self, method: str, kind: str, retry_after: float | None, attempt: int) -> None:
        """Record a retryable failure; a 429 pauses `method` for every caller."""
        self.stats.retries += 1
        now = self._clock()
        if kind == "ratelimited":
            self.stats.rate_limited += 1
            pause = retry_after if retry_after is not None else 1.0
        else:
            pause = min(0.25 * 2**attempt, 5.0)
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
            self._spawn(self._deliver_update(slot, slot.text, slot.blocks))
        return soonest

    async def _finished(self) -> None:
        self._wake.set()
        async with self._idle:
            self._idle.notify_all()

    # -- sending ---------------------------------------------------------------------------------

    async def _deliver_update(self, slot: Slot, text: str, blocks: list[dict[str, Any]] | None) -> None:
        kwargs: dict[str, Any] = {"channel": slot.ref.channel, "ts": slot.ref.known_ts, "text": text}
        if blocks is not None:
            kwargs["blocks"] = blocks
        try:
            await self._send("chat.update", kwargs)
            slot.failures = 0
        except Exception as exc:  # an update is idempotent, so retry is safe
            kind, retry_after = classify(exc)
            if kind == "fatal" or slot.failures >= _MAX_ATTEMPTS:
                self.stats.dropped_updates += 1
                log.warning("chat.update of %r dropped: %s", slot.ref, _error_code(exc) or exc)
            else:
                slot.failures += 1
                self._note_retry("chat.update", kind, retry_after, slot.failures)
                if not slot.dirty:  # nothing newer arrived meanwhile: resend this state
                    slot.dirty, slot.text, slot.blocks = True, text, blocks
                slot.last_sent = float("-inf")
        finally:
            slot.in_flight = False
            await self._finished()

    async def _deliver_post(self, post: Post) -> None:
        channel = post.ref.channel
        try:
            post.ref._resolve(await self._post_once(post))
        except OutboxError as exc:
            post.ref._fail(exc)
        except Exception as exc:  # a bug must not leave the ref (and flush) waiting forever
            log.exception("outbox post failed unexpectedly")
            post.ref._fail(OutboxError(f"post failed: {exc!r}", method="chat.postMessage"))
        finally:
            if post.ref.known_ts is None and not post.ref.failed:  # cancelled by close()
                post.ref._fail(OutboxError("outbox closed while posting", method="chat.postMessage"))
            self._posting.discard(channel)
            await self._finished()

    async def _post_once(self, post: Post) -> str:
        """Send a post, retrying only in ways that cannot duplicate it; return its ts."""
        channel = post.ref.channel
        if post.root is not None:
            post.kwargs["thread_ts"] = post.root.known_ts
        for attempt in range(_MAX_ATTEMPTS):
            delay = self._channel_next.get(channel, 0.0) - self._clock()
            while delay > 0:  # pacing, not waiting for a condition
                await asyncio.sleep(delay)
                delay = self._channel_next.get(channel, 0.0) - self._clock()
            await self._gate("chat.postMessage")
            self._channel_next[channel] = self._clock() + self.channel_interval
            oldest = f"{time.time() - 120:.6f}"  # Slack ts is wall-clock seconds
            try:
                return str((await self._send("chat.postMessage", post.kwargs))["ts"])
            except Exception as exc:
                kind, retry_after = classify(exc)
                if kind == "fatal":
                    raise OutboxError(
                        f"post failed: {exc}", method="chat.postMessage", error=_error_code(exc)
                    ) from exc
                if kind == "ambiguous":
                    found = await self._find_posted(post, oldest)
                    if found:
                        self.stats.duplicates_avoided += 1
                        return found
                self._note_retry("chat.postMessage", kind, retry_after, attempt)
        raise OutboxError(f"post failed after {_MAX_ATTEMPTS} attempts", method="chat.postMessage")

    async def _find_posted(self, post: Post, oldest: str) -> str | None:
        """The ts of a post that may have reached Slack, found by its marker; "" if surely absent."""
        channel = post.ref.channel
        args: dict[str, Any]
        try:
            if post.root is not None:
                method, args = "conversations.replies", {"ts": post.root.known_ts}
            else:
                method, args = "conversations.history", {"oldest": oldest, "limit": 200}
            await self._gate(method)
            data = await self._send(method, {"channel": channel, "include_all_metadata": True, **args})
        except Exception as exc:  # any failure here means "unknown"
            raise OutboxError(
                "post outcome unknown and not retried (it may have been delivered)", method="chat.postMessage"
            ) from exc
        for message in data.get("messages", []):
            payload = (message.get("metadata") or {}).get("event_payload") or {}
            if payload.get("id") == post.marker:
                return str(message["ts"])
        return ""


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("outbox dispatcher stopped", exc_info=task.exception())


def _error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    try:
        return None if response is None else str(response.get("error"))
    except (AttributeError, TypeError):
        return None
