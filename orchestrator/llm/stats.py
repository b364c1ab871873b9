"""Process-wide counts of model calls, by provider and outcome, for the bot's `/metrics`.

Every streamed turn passes through `retry.stream_with_retries` (the only place that retries), which
records each attempt here: `ok` (the first item arrived), `retried` (a transient failure, tried
again) or `error` (the turn failed). Counters only grow; a scrape reads a snapshot.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator


class ProviderStats:
    """Attempt outcomes keyed by (provider, outcome, status); status is the HTTP code or "none"."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # warm-up streams from a worker thread
        self._counts: Counter[tuple[str, str, str]] = Counter()
        self._local = threading.local()

    @contextlib.contextmanager
    def muted(self) -> Iterator[None]:
        """Attempts made by this thread meanwhile are not counted (the canned warm-up turns)."""
        self._local.muted = True
        try:
            yield
        finally:
            self._local.muted = False

    def record(self, provider: str, outcome: str, status: int | None = None) -> None:
        """Count one attempt."""
        if getattr(self._local, "muted", False):
            return
        with self._lock:
            self._counts[(provider, outcome, "none" if status is None else str(status))] += 1

    def snapshot(self) -> dict[tuple[str, str, str], int]:
        """A copy of the counts."""
        with self._lock:
            return dict(self._counts)


PROVIDER_STATS = ProviderStats()


def provider_stats() -> ProviderStats:
    """The process's model-call counters."""
    return PROVIDER_STATS
