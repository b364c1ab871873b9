"""Concurrent lookups of one key each become one lookup of all their keys.

After a restart a worker resumes every run it held at once, and each resume looks up the same few
things (where the run lives in Slack, its saved posts, a Stop clicked meanwhile). One query per
resume and per thing is hundreds of round trips queued on one busy event loop and a small
connection pool; batched, they are a handful, and the last resume waits about as long as the first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Batched(Generic[K, V]):
    """`get(key)`: one value by key, fetched with every other key asked for meanwhile.

    The first caller of a batch schedules its fetch for the next turn of the event loop; callers
    arriving while a fetch is under way form the next batch. `fetch` gets at most `limit` keys
    at a time and returns the values it found (a key it leaves out gets None). A failed fetch
    fails every caller of its batch with the same error.
    """

    def __init__(self, fetch: Callable[[list[K]], Awaitable[Mapping[K, V]]], *, limit: int = 500) -> None:
        self._fetch = fetch
        self._limit = limit
        self._waiting: dict[K, list[asyncio.Future[V | None]]] = {}
        self._flush: asyncio.Task[None] | None = None

    async def get(self, key: K) -> V | None:
        """The value for `key` (None: there is none)."""
        future: asyncio.Future[V | None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(future)
        if self._flush is None:
            self._flush = asyncio.ensure_future(self._run())
        return await future

    async def _run(self) -> None:
        await asyncio.sleep(0)  # the other callers of this turn join the batch
        waiting, self._waiting, self._flush = self._waiting, {}, None
        keys = list(waiting)
        found: dict[K, V] = {}
        try:
            for start in range(0, len(keys), self._limit):
                found.update(await self._fetch(keys[start : start + self._limit]))
        except BaseException as exc:  # its callers learn of it (a cancelled fetch cancels them)
            for futures in waiting.values():
                for future in futures:
                    if future.done():
                        continue
                    if isinstance(exc, Exception):
                        future.set_exception(exc)
                    else:
                        future.cancel()
            if not isinstance(exc, Exception):
                raise
            return
        for key, futures in waiting.items():
            for future in futures:
                if not future.done():
                    future.set_result(found.get(key))


__all__ = ["Batched"]
