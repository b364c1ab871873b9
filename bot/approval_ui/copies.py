"""Copies of an approval request in approvers' DMs, for approvers who cannot see the run's thread.

A request lives in its run's thread; an approver outside a private run channel would never see
it and it would expire as a deny. `MASSGEN_APPROVAL_DMS` decides who also gets a DM copy with the
same buttons: `non_members` (default: approvers not in the run's channel), `always`, `never`.
Every copy's channel and ts are stored, so each loses its buttons with the thread copy, also
after a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal

from approvals import ApprovalRequest
from bot.slack.outbox import MessageRef, Outbox
from bot.slack.store import BotStore

log = logging.getLogger(__name__)

DmPolicy = Literal["non_members", "always", "never"]
Members = Callable[[str], Awaitable[frozenset[str]]]  # a user group's members
MAX_DMS = 50  # a request naming a huge group does not DM a whole company
_MEMBER_PAGES = 20  # conversations.members pages of 1,000 (Tier 4)


class ApproverDMs:
    """Posts DM copies of a request and rewrites them with the thread copy."""

    def __init__(self, outbox: Outbox, store: BotStore, group_members: Members, *, policy: DmPolicy) -> None:
        self._outbox = outbox
        self._store = store
        self._group_members = group_members
        self.policy: DmPolicy = policy

    async def send(
        self, request: ApprovalRequest, channel: str, direct: Iterable[str], text: str, blocks: list[Any]
    ) -> list[str]:
        """DM the approvers the policy names (besides the thread in `channel`); the DM channels."""
        if self.policy == "never":
            return []
        sent = []
        for user in await self._recipients(request, channel, direct):
            try:
                opened = await self._outbox.call("conversations.open", users=user)
                dm = str((opened.get("channel") or {}).get("id") or "")
                if not dm:
                    continue
                ref = self._outbox.post(dm, text=text, blocks=blocks, priority=10, run_id=request.run_id)
                await self._store.record_approval_copy(request.id, dm, await ref.ts())
            except Exception as exc:  # one approver's DM failing must not stop the others
                log.warning("approval %s: DM to %s failed: %s", request.id, user, exc)
                continue
            sent.append(dm)
        return sent

    async def rewrite(self, request_id: str, text: str, blocks: list[Any]) -> None:
        """Give every DM copy the thread copy's new text and blocks."""
        for channel, ts in await self._store.approval_copies(request_id):
            self._outbox.update(MessageRef.existing(channel, ts), text=text, blocks=blocks)

    async def _recipients(self, request: ApprovalRequest, channel: str, direct: Iterable[str]) -> list[str]:
        approvers = request.approvers
        people = set(direct)
        for group in sorted(approvers.groups):
            people |= await self._group_members(group)
        if not approvers.allow_self_approval:
            people.discard(request.requester_id)
        if self.policy == "non_members" and people:
            people -= await self._channel_members(channel)
        return sorted(people)[:MAX_DMS]

    async def _channel_members(self, channel: str) -> frozenset[str]:
        """Who is in `channel`; nobody if Slack will not say (then every approver gets a DM)."""
        if channel.startswith("D"):  # a run in someone's DM with the bot: no approver can see it
            return frozenset()
        members: set[str] = set()
        cursor = ""
        for _ in range(_MEMBER_PAGES):
            try:
                page = await self._outbox.call(
                    "conversations.members", channel=channel, limit=1000, cursor=cursor
                )
            except Exception as exc:
                log.warning("conversations.members %s failed: %s", channel, exc)
                return frozenset()
            members.update(u for u in page.get("members") or [] if isinstance(u, str))
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                break
        return frozenset(members)
