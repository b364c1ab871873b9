"""Which runs a person may see in their App Home: their own, and those of conversations they can read.

"Recent runs" showed task text from every channel, private channels and DMs included, to anyone who
opened the tab (issue 9, item 4). A run is now listed for a viewer when they requested it, when its
channel is public (`conversations.info`: not private, not a DM), or when they are a member of it
(`conversations.members`). DMs are only ever shown to the requester. Anything Slack will not answer
counts as "cannot see". Answers are cached (`conversations.info` is Tier 3, shared with every run).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol

log = logging.getLogger(__name__)

ApiCall = Callable[..., Awaitable[Mapping[str, Any]]]  # the outbox's `call`
Kind = Literal["public", "members", "hidden"]
_MEMBER_PAGES = 20  # conversations.members pages of 1,000


class Visible(Protocol):
    """A run as far as visibility goes (`bot.runs.SlackRun` has these fields)."""

    @property
    def channel(self) -> str: ...
    @property
    def requester(self) -> str | None: ...


class ChannelAccess:
    """Answers "may `user` see runs of `channel`?" from Slack, remembering answers for `ttl` s."""

    def __init__(
        self, call: ApiCall, *, ttl: float = 120.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._call = call
        self._ttl = ttl
        self._clock = clock
        self._kinds: dict[str, tuple[float, Kind]] = {}
        self._members: dict[str, tuple[float, frozenset[str]]] = {}

    async def may_see(self, user: str, run: Visible) -> bool:
        """Own runs always; others by their channel: public, or one `user` is a member of."""
        if run.requester == user:
            return True
        kind = await self._kind(run.channel)
        if kind == "public":
            return True
        return kind == "members" and user in await self._members_of(run.channel)

    async def _kind(self, channel: str) -> Kind:
        if channel.startswith("D"):
            return "hidden"  # a DM: only its requester (handled above) sees its runs
        cached = self._kinds.get(channel)
        if cached is not None and self._clock() - cached[0] < self._ttl:
            return cached[1]
        try:
            info = (await self._call("conversations.info", channel=channel)).get("channel") or {}
        except Exception as exc:  # cannot tell: hide it
            log.info("conversations.info %s failed: %s", channel, exc)
            return "hidden"
        kind: Kind
        if info.get("is_im"):
            kind = "hidden"
        elif info.get("is_private") or info.get("is_mpim") or info.get("is_group"):
            kind = "members"
        else:
            kind = "public"
        self._kinds[channel] = (self._clock(), kind)
        return kind

    async def _members_of(self, channel: str) -> frozenset[str]:
        cached = self._members.get(channel)
        if cached is not None and self._clock() - cached[0] < self._ttl:
            return cached[1]
        members: set[str] = set()
        cursor = ""
        for _ in range(_MEMBER_PAGES):
            try:
                page = await self._call("conversations.members", channel=channel, limit=1000, cursor=cursor)
            except Exception as exc:  # the bot is not in it, or Slack refuses: nobody (but requesters)
                log.info("conversations.members %s failed: %s", channel, exc)
                return frozenset()
            members.update(u for u in page.get("members") or [] if isinstance(u, str))
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                break
        found = frozenset(members)
        self._members[channel] = (self._clock(), found)
        return found
