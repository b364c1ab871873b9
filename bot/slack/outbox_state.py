"""The outbox's queued state: message references, pending posts, per-message update slots.

Pure bookkeeping, no I/O: which post may go next in a channel (priority first, but never out of
order within a thread, and never before its root has a `ts`), and which update slots name the
same message.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bot.errors import OutboxError

PRIORITY_STATUS = 0
PRIORITY_THREAD = 5
PRIORITY_APPROVAL = 10
PRIORITY_FINAL = 10
NOT_SAVED = "not_saved"  # the error of a post not sent because its row could not be written
# Posts not sent because another process sends them (never given up: nothing is missing).
DUPLICATE = "duplicate"  # a post of the same key was saved already (a run's final answer, twice)
TAKEN = "taken"  # a janitor gave the post's row to another process


class MessageRef:
    """A message the outbox posted (or will post); `ts()` waits for Slack's id."""

    __slots__ = ("_done", "_error", "_ts", "channel", "marker")

    def __init__(self, channel: str, ts: str | None = None, *, marker: str | None = None) -> None:
        self.channel = channel
        self.marker = marker  # the outbox post's id (its row in `slack_outbox`), if it is one
        self._ts = ts
        self._error: OutboxError | None = None
        self._done = asyncio.Event()
        if ts is not None:
            self._done.set()

    @classmethod
    def existing(cls, channel: str, ts: str) -> MessageRef:
        """A message posted earlier (e.g. the one a button was clicked in)."""
        return cls(channel, ts)

    async def ts(self) -> str:
        """Slack's `ts` once posted; raises `OutboxError` if the post finally failed."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._ts is not None
        return self._ts

    @property
    def known_ts(self) -> str | None:
        return self._ts

    @property
    def failed(self) -> bool:
        return self._error is not None

    def _resolve(self, ts: str) -> None:
        self._ts = ts
        self._done.set()

    def _fail(self, error: OutboxError) -> None:
        self._error = error
        self._done.set()

    def __repr__(self) -> str:
        return f"MessageRef({self.channel!r}, {self._ts!r})"


@dataclass(slots=True)
class OutboxStats:
    """Counters for tests, logs and the benchmark."""

    calls_by_method: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    rate_limited: int = 0  # HTTP 429s seen
    coalesced_updates: int = 0  # updates replaced by a newer state before being sent
    duplicates_avoided: int = 0  # ambiguous post failures found already delivered
    dropped_updates: int = 0  # updates Slack refused (e.g. message_not_found)
    resumed_posts: int = 0  # posts a previous process left unsent, sent by this one
    resumed_updates: int = 0  # message states a previous process had not shown yet
    split_posts: int = 0  # posts Slack refused as too long / invalid, sent as several text messages
    given_up: int = 0  # posts finally not delivered (each logged with its run and reason)


@dataclass(frozen=True, slots=True)
class GiveUp:
    """A post the outbox finally did not deliver, and why (passed to give-up listeners)."""

    post_id: str
    channel: str
    run_id: str | None
    reason: str
    error: str | None = None


@dataclass(eq=False, slots=True)
class Post:
    """A queued `chat.postMessage` and the marker that finds it again after an ambiguous failure."""

    ref: MessageRef
    kwargs: dict[str, Any]
    root: MessageRef | None
    priority: int
    seq: int
    marker: str
    run_id: str | None = None
    maybe_sent: bool = False  # resumed after an attempt: look it up before sending again
    saving: asyncio.Task[None] | None = None  # the write of its row, awaited before the first send
    once: str | None = None  # the name under which a second queueing is this same post


@dataclass(eq=False, slots=True)
class Slot:
    """The latest wanted state of one message, and when it was last sent."""

    ref: MessageRef
    text: str = ""
    blocks: list[dict[str, Any]] | None = None
    dirty: bool = False
    dirty_since: float = 0.0
    last_sent: float = float("-inf")
    in_flight: bool = False
    failures: int = 0
    rate_limited: int = 0  # 429s in a row (waited out, not failures)
    failing_since: float | None = None  # the first failure of the current run of them (the window)
    version: int = 0  # order of update() calls, to merge slots keeping the newest state
    row_ids: set[str] = field(default_factory=set)  # its rows in the store (marked sent once shown)


def next_post(queue: list[Post]) -> tuple[Post | None, list[Post]]:
    """The post to send next from one channel's queue, and the replies whose root failed.

    Highest priority (then oldest) among thread heads whose root is posted; the failed replies are
    removed from `queue` for the caller to fail.
    """
    heads: dict[object, Post] = {}
    for post in queue:
        # One thread = one root ts, however many MessageRef objects name it.
        key: object = id(post) if post.root is None else (post.root.known_ts or id(post.root))
        heads.setdefault(key, post)
    best: Post | None = None
    orphans = [p for p in heads.values() if p.root is not None and p.root.failed]
    for post in heads.values():
        if post in orphans or (post.root is not None and post.root.known_ts is None):
            continue
        if best is None or (post.priority, -post.seq) > (best.priority, -best.seq):
            best = post
    for post in orphans:
        queue.remove(post)
    return best, orphans


def rekey_slots(slots: dict[object, Slot]) -> None:
    """Move slots of refs that just got their ts under (channel, ts), merging with any there.

    Slots are keyed by the ref while its post is pending and by (channel, ts) afterwards, so
    refs made with `MessageRef.existing` for the same message share one slot (one update budget).
    """
    for key, slot in list(slots.items()):
        if not isinstance(key, MessageRef) or (key.known_ts is None and not key.failed):
            continue
        del slots[key]
        if key.failed:
            continue
        other = slots.setdefault((key.channel, key.known_ts), slot)
        if other is not slot:
            other.row_ids |= slot.row_ids
        if other is not slot and slot.dirty and slot.version > other.version:
            other.text, other.blocks, other.version = slot.text, slot.blocks, slot.version
            if not other.dirty:
                other.dirty, other.dirty_since = True, slot.dirty_since


def slot_key(ref: MessageRef) -> object:
    return ref if ref.known_ts is None else (ref.channel, ref.known_ts)
