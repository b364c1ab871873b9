"""One Slack call or message, delivered once: paced, retried, never posted twice.

Slack has no idempotency key, so each post carries a marker in its message `metadata`; after an
ambiguous failure (timeout, 5xx, dropped connection after sending) the sender looks for the marker
(`conversations.replies` for thread replies, `conversations.history` for channel posts) and only
re-sends when the message is not there. If the lookup itself keeps failing the post is *not*
retried and fails with `OutboxError`: a missing message is visible and reported, a duplicate
approval request is not acceptable. Posts and updates are retried for a window, not a number of
attempts (a Slack outage of minutes delays them, it does not lose them); a 429 pauses its method
for every caller and never counts as a failed attempt. A post Slack refuses as too long or with
invalid blocks that has no buttons (a final answer) is sent as several plain-text messages instead.

What waits, in which order and how often it may go, is the `Outbox`'s (its queues and pacing).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import OutboxError
from bot.slack.outbox_budget import Budgets, classify
from bot.slack.outbox_state import OutboxStats, Post, Slot

if TYPE_CHECKING:
    from bot.slack.outbox_rows import Rows

log = logging.getLogger(__name__)

MARKER_EVENT = "massgen_outbox"  # metadata event_type carrying the post's client-generated id
_MAX_ATTEMPTS = 5  # of an interactive call (`call`: a views.open's trigger lasts 3 s anyway)
# The backoff doubles up to its cap, with jitter, and never comes before Slack's Retry-After (429s,
# and 503s during an incident).
RETRY_WINDOW = 900.0
RETRY_MAX_DELAY = 8.0
# Refusals a text-only post survives by being re-sent as plain-text pieces.
_SPLIT_ON = frozenset({"msg_too_long", "invalid_blocks", "msg_blocks_too_long", "invalid_arguments"})
SPLIT_CHARS = 3_900  # per piece: under the 4,000 characters Slack shows of a top-level text


class Sender:
    """Sends one Web API call, post or update at a time for the outbox, through the shared budgets."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        budgets: Budgets,
        stats: OutboxStats,
        clock: Callable[[], float] = time.monotonic,
        channel_interval: float = 1.0,
        call_timeout: float | None = None,
        retry_window: float = RETRY_WINDOW,
        retry_max_delay: float = RETRY_MAX_DELAY,
    ) -> None:
        # The sender does its own retries; the SDK's default connection-error retry would resend
        # a chat.postMessage whose request already reached Slack, i.e. post it twice.
        self._client = copy.copy(client)  # same token, base_url, session, proxy, ssl, team_id
        self._client.retry_handlers = []
        if call_timeout is not None:
            self._client.timeout = call_timeout  # type: ignore[assignment]  # annotated int, used as float
        self.rows: Rows | None = None  # the outbox's saved posts and states, once it has a store
        self.budgets = budgets
        self.stats = stats
        self._clock = clock
        self.channel_interval = channel_interval
        self.retry_window = retry_window
        self.retry_max_delay = retry_max_delay
        self.channel_next: dict[str, float] = {}  # per channel: when its next post may go

    def _channel_pace(self) -> float:
        return self.channel_interval / self.budgets.share

    async def call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        """Any other Web API method, through its tier's shared budget and the 429 back-off."""
        for attempt in range(_MAX_ATTEMPTS):
            await self.gate(method)
            try:
                return await self.send(method, kwargs)
            except Exception as exc:  # classified: unknown kinds are fatal
                kind, retry_after = classify(exc)
                if kind == "fatal" or (kind == "ambiguous" and method == "chat.postMessage"):
                    raise OutboxError(
                        f"{method} failed: {exc}", method=method, error=error_code(exc)
                    ) from exc
                self.note_retry(method, kind, retry_after, attempt)
        raise OutboxError(f"{method} failed after {_MAX_ATTEMPTS} attempts", method=method)

    async def gate(self, method: str) -> None:
        """Wait for the method's budget and take one token (sleeping is the pacing itself)."""
        delay = self.budgets.wait_time(method, self._clock())
        while delay > 0:
            await asyncio.sleep(delay)
            delay = self.budgets.wait_time(method, self._clock())
        self.budgets.take(method, self._clock())

    async def send(self, method: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """One Web API call; the SDK's own method when it has one (read methods take form/query
        parameters, not JSON bodies), else a JSON `api_call`."""
        self.stats.calls_by_method[method] += 1
        sdk_method = getattr(self._client, method.replace(".", "_"), None)
        if callable(sdk_method):
            response = await sdk_method(**kwargs)
        else:
            response = await self._client.api_call(method, json=kwargs)
        return dict(response.data) if isinstance(response.data, dict) else {}

    def backoff(self, attempt: int) -> float:
        """Seconds before try `attempt + 1`: doubling from 0.25 s up to `retry_max_delay`, ±20% jitter."""
        return min(0.25 * 2.0 ** min(attempt, 16), self.retry_max_delay) * random.uniform(0.8, 1.2)  # noqa: S311

    def note_retry(self, method: str, kind: str, retry_after: float | None, attempt: int) -> None:
        """Record a retryable failure; a 429 pauses `method` for every caller."""
        self.stats.retries += 1
        now = self._clock()
        if kind == "ratelimited":
            self.stats.rate_limited += 1
            pause = retry_after if retry_after is not None else 1.0
        else:
            pause = max(self.backoff(attempt), retry_after or 0.0)
        self.budgets.back_off(method, now + pause)
        log.info("slack %s: %s, retrying in %.2fs", method, kind, pause)

    async def update(self, slot: Slot, text: str, blocks: list[dict[str, Any]] | None, version: int) -> None:
        """One `chat.update` of `slot` to state `version`; a failure is retried (it is idempotent) by
        marking the slot dirty again, until the retry window ends: then the update is dropped."""
        kwargs: dict[str, Any] = {"channel": slot.ref.channel, "ts": slot.ref.known_ts, "text": text}
        if blocks is not None:
            kwargs["blocks"] = blocks
        try:
            await self.send("chat.update", kwargs)
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
                log.warning("chat.update of %r given up: %s", slot.ref, error_code(exc) or exc)
                await self._mark_shown(slot, version)
            else:
                self.note_retry("chat.update", kind, retry_after, slot.failures)
                if not slot.dirty:  # nothing newer arrived meanwhile: resend this state
                    slot.dirty, slot.text, slot.blocks = True, text, blocks
                slot.last_sent = float("-inf")

    async def _mark_shown(self, slot: Slot, version: int) -> None:
        """State `version` is on Slack (or never will be): its rows need no resend after a restart."""
        if self.rows is not None:
            await self.rows.shown(slot, version)

    async def post(self, post: Post) -> str:
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
            delay = self.channel_next.get(channel, 0.0) - self._clock()
            while delay > 0:  # pacing, not waiting for a condition
                await asyncio.sleep(delay)
                delay = self.channel_next.get(channel, 0.0) - self._clock()
            await self.gate("chat.postMessage")
            self.channel_next[channel] = self._clock() + self._channel_pace()
            if whole and self.rows is not None:
                await self.rows.claim_attempt(marker, thread, time.time())
            try:
                return str((await self.send("chat.postMessage", kwargs))["ts"])
            except Exception as exc:
                kind, retry_after = classify(exc)
                if kind == "fatal":
                    raise OutboxError(
                        f"post failed: {exc}", method="chat.postMessage", error=error_code(exc)
                    ) from exc
                if kind == "ambiguous" and (
                    found := await self._look_up(channel, marker, thread, oldest, give_up_at)
                ):
                    self.stats.duplicates_avoided += 1
                    return found
                if whole and self.rows is not None:
                    await self.rows.note("note_error", marker, f"{kind}: {error_code(exc) or exc!r}")
                if self._clock() >= give_up_at:
                    raise OutboxError(
                        f"post failed for {self.retry_window:g} s ({kind})",
                        method="chat.postMessage",
                        error=error_code(exc),
                    ) from exc
                attempt += kind != "ratelimited"
                self.note_retry("chat.postMessage", kind, retry_after, attempt)

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
            await asyncio.sleep(min(self.backoff(attempt), max(give_up_at - self._clock(), 0.0)))

    async def _read_history(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """A history read; in a public channel the bot posted to uninvited (`chat:write.public`),
        Slack answers `not_in_channel`: join it (`channels:join`) and read again."""
        await self.gate(method)
        try:
            return await self.send(method, args)
        except SlackApiError as exc:
            if error_code(exc) != "not_in_channel":
                raise
        log.info("joining %s to look up a post whose answer was lost", args["channel"])
        await self.gate("conversations.join")
        await self.send("conversations.join", {"channel": args["channel"]})
        await self.gate(method)
        return await self.send(method, args)

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
                error=error_code(exc),
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


def error_code(exc: BaseException) -> str | None:
    """Slack's error code of a failed call (`channel_not_found`), None when it has none."""
    response = getattr(exc, "response", None)
    try:
        return None if response is None else str(response.get("error"))
    except (AttributeError, TypeError):
        return None


__all__ = [
    "MARKER_EVENT",
    "RETRY_MAX_DELAY",
    "RETRY_WINDOW",
    "SPLIT_CHARS",
    "Sender",
    "error_code",
    "split_text",
]
