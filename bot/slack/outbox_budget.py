"""Rate budgets and failure classification for the outbox (pure, no I/O)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

import aiohttp
from slack_sdk.errors import SlackApiError

from orchestrator.llm import parse_retry_after

# docs.slack.dev/apis/web-api/rate-limits and each method's page; 5 = "special", treated as Tier 4.
_TIERS = {
    "chat.update": 3,
    "chat.delete": 3,
    "reactions.add": 3,
    "conversations.info": 3,
    "conversations.replies": 3,
    "conversations.history": 3,
    "conversations.join": 3,
    "usergroups.users.list": 2,
    "chat.postEphemeral": 4,
    "views.open": 4,
    "views.update": 4,
    "views.push": 4,
    "views.publish": 4,
    "users.info": 4,
    "auth.test": 5,
    "chat.getPermalink": 5,
}

FailureKind = Literal["ratelimited", "unsent", "ambiguous", "fatal"]


def method_tier(method: str) -> int:
    """The method's Slack tier; unknown methods get Tier 2 to stay safe."""
    return _TIERS.get(method, 2)


@dataclass(slots=True)
class TokenBucket:
    """`capacity` calls at once, refilled at `rate` per second.

    Any window of W seconds then admits at most capacity + rate * W calls, so a bucket sized
    `per(45, 60)` stays under Slack's 50 per minute even after an idle spell.
    """

    capacity: float
    rate: float
    tokens: float = -1.0
    updated: float = 0.0

    @classmethod
    def per(cls, per_window: float, window: float, *, empty: bool = False) -> TokenBucket:
        """`per_window` calls per `window` s; `empty`: it fills from nothing (no first burst)."""
        bucket = cls(capacity=max(1.0, per_window // 10), rate=per_window / window)
        if empty:
            bucket.tokens = 0.0
        return bucket

    def resize(self, per_window: float, window: float, now: float) -> None:
        """A new rate (a share of the workspace's); tokens above the new capacity are dropped."""
        self._refill(now)
        self.capacity, self.rate = max(1.0, per_window // 10), per_window / window
        self.tokens = min(self.tokens, self.capacity)

    def _refill(self, now: float) -> None:
        if self.tokens < 0:
            self.tokens, self.updated = self.capacity, now
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def wait_time(self, now: float) -> float:
        """Seconds until one token is available (0 when it is now)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1.0


class Budgets:
    """One token bucket per Web API method, sized by its tier, plus a per-method 429 back-off.

    Slack counts limits "per API method per workspace per app", so every run shares these; a 429
    on one method pauses that method only. Several processes of one app share them too: each
    keeps `share` of every rate (`set_share`, 1 / the live processes), and once it knows it is
    not alone its new buckets fill from empty, so a process that joins adds no burst.
    """

    def __init__(self, per_window: dict[int, int], window: float, *, posts_per_minute: int) -> None:
        self._per_window = per_window
        self._posts_per_window = posts_per_minute
        self._window = window
        self._buckets = {"chat.postMessage": TokenBucket.per(posts_per_minute, window)}
        self._backoff: dict[str, float] = {}
        self.share = 1.0

    def _limit(self, method: str) -> float:
        if method == "chat.postMessage":
            return self._posts_per_window * self.share
        return self._per_window[method_tier(method)] * self.share

    def _bucket(self, method: str) -> TokenBucket:
        bucket = self._buckets.get(method)
        if bucket is None:
            bucket = self._buckets[method] = TokenBucket.per(
                self._limit(method), self._window, empty=self.share < 1.0
            )
        return bucket

    def set_share(self, share: float, now: float) -> None:
        """Keep `share` (0 < share <= 1) of every method's rate from now on."""
        if not 0.0 < share <= 1.0:
            raise ValueError(f"a share of the budget is in (0, 1], not {share}")
        if share == self.share:
            return
        self.share = share
        for method, bucket in self._buckets.items():
            bucket.resize(self._limit(method), self._window, now)

    def wait_time(self, method: str, now: float) -> float:
        """Seconds until `method` may be called: the 429 back-off first, then its token bucket."""
        backoff = self._backoff.get(method, 0.0) - now
        return backoff if backoff > 0 else self._bucket(method).wait_time(now)

    def take(self, method: str, now: float) -> None:
        self._bucket(method).take(now)

    def back_off(self, method: str, until: float) -> None:
        self._backoff[method] = max(self._backoff.get(method, 0.0), until)


def _retry_after(exc: SlackApiError) -> float | None:
    """Slack's `Retry-After` (429s, and 503s during an outage), in seconds or an HTTP date."""
    headers = getattr(exc.response, "headers", None) or {}
    return parse_retry_after({str(k): str(v) for k, v in dict(headers).items()})


def classify(exc: BaseException) -> tuple[FailureKind, float | None]:
    """How a failed call may be retried, and Slack's Retry-After when it gave one.

    `unsent`: the request never reached Slack (safe to resend); `ambiguous`: it may have been
    processed (timeouts, 5xx, a connection dropped after sending); `fatal`: Slack said no.
    """
    if isinstance(exc, SlackApiError):
        status = getattr(exc.response, "status_code", 200)
        if status == 429:
            return "ratelimited", _retry_after(exc)
        return ("ambiguous", _retry_after(exc)) if status >= 500 else ("fatal", None)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "unsent", None
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ClientError)):
        return "ambiguous", None
    return "fatal", None
