"""Slack user-group membership for authorisation, cached with a TTL (`usergroups.users.list` is Tier 2)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)

# `method, **kwargs -> response dict`: the outbox's `call`, so lookups share its budget and back-off.
ApiCall = Callable[..., Awaitable[Mapping[str, Any]]]


class GroupResolver:
    """Answers "which of these groups is this user in?" from Slack, remembering each group for `ttl` s.

    A failed lookup counts as "not a member" (fail closed) and is not cached, so the next click asks again.
    """

    def __init__(
        self, call: ApiCall, *, ttl: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._call = call
        self._ttl = ttl
        self._clock = clock
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def groups_of(self, user_id: str, candidates: Iterable[str]) -> frozenset[str]:
        """The subset of `candidates` (group ids) that `user_id` belongs to."""
        found = set()
        for group in sorted(set(candidates)):
            if user_id in await self.members(group):
                found.add(group)
        return frozenset(found)

    async def members(self, group: str) -> frozenset[str]:
        """Members of one group, from the cache while fresh."""
        cached = self._members.get(group)
        if cached is not None and self._clock() - cached[0] < self._ttl:
            return cached[1]
        # One lookup per group at a time: fifty clicks at once must not cost fifty Tier 2 calls.
        lock = self._locks.setdefault(group, asyncio.Lock())
        async with lock:
            cached = self._members.get(group)
            if cached is not None and self._clock() - cached[0] < self._ttl:
                return cached[1]
            try:
                response = await self._call("usergroups.users.list", usergroup=group)
            except Exception as exc:  # a Slack failure must deny, never crash the click handler
                log.warning("usergroups.users.list failed for %s: %s", group, exc)
                return frozenset()
            users = response.get("users") or []
            members = frozenset(u for u in users if isinstance(u, str))
            self._members[group] = (self._clock(), members)
            return members

    def forget(self) -> None:
        """Drop the cache (tests, or after a membership change notification)."""
        self._members.clear()
