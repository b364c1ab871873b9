"""What a run's requester is told when Slack would not show the run: one line, by what still works.

Two cases: the status message itself could not be posted (the run is stopped: the bot is not in
the channel, or Slack failed for the outbox's whole retry window), and a later post was given up
(the answer or a thread post is missing in the channel). The second is told once per run and
process, as an ephemeral in the channel, else a DM.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.errors import OutboxError
from bot.runs.submitter import RECENT_SUBMITS
from bot.slack.outbox import NOT_SAVED, GiveUp, Outbox
from orchestrator import RunStore

log = logging.getLogger(__name__)

# What Slack answers when the bot may not post where it was asked (the rest: Slack failed).
NOT_A_MEMBER = frozenset(
    {"not_in_channel", "channel_not_found", "is_archived", "restricted_action", "cannot_dm_bot",
     "ekm_access_denied", "team_access_not_granted", "messages_tab_disabled"}
)  # fmt: skip
Spawn = Callable[[Coroutine[Any, Any, Any], str], asyncio.Task[Any]]


class RequesterNotices:
    """Tells requesters about runs Slack does not show."""

    def __init__(self, outbox: Outbox, run_store: RunStore | None, spawn: Spawn) -> None:
        self._outbox = outbox
        self._run_store = run_store
        self._spawn = spawn
        self._told: dict[str, None] = {}  # runs whose requester heard that Slack lost a post

    def given_up(self, event: GiveUp, requester: str | None) -> None:
        """A post of run `event.run_id` was given up; its requester (looked up if None) hears once."""
        run_id = event.run_id
        if run_id is None or run_id in self._told or event.error == NOT_SAVED:
            return  # not saved: the step that queued it runs again and queues it again
        self._told[run_id] = None
        if len(self._told) > RECENT_SUBMITS:
            self._told.pop(next(iter(self._told)))
        self._spawn(self._tell_given_up(run_id, event, requester), f"given-up:{run_id}")

    async def _tell_given_up(self, run_id: str, event: GiveUp, requester: str | None) -> None:
        requester = requester or await self._requester_of(run_id)
        if requester is None:
            return
        text = (
            f"Slack did not take some of the messages of run `{run_id}` (its status or answer may be "
            f"missing in the channel: {event.error or event.reason}). `/massgen status {run_id}` shows "
            "how it stands."
        )
        try:
            await self._outbox.ephemeral(event.channel, requester, text=text)
            return
        except OutboxError as exc:
            log.warning("run %s: telling %s in the channel failed (%s); trying a DM", run_id, requester, exc)
        try:
            opened = await self._outbox.call("conversations.open", users=requester)
            dm = str((opened.get("channel") or {}).get("id") or "")
            if dm:
                await self._outbox.call("chat.postMessage", channel=dm, text=text)
        except OutboxError as exc:
            log.error("run %s: its requester could not be told that Slack lost a post: %s", run_id, exc)

    async def _requester_of(self, run_id: str) -> str | None:
        if self._run_store is None:
            return None
        events = await self._run_store.events(run_id)
        started = events[0] if events else None
        return getattr(started, "requester", None)

    async def root_failed(self, channel: str, requester: str, response_url: str | None, reason: str) -> None:
        """The run's status message could not be posted, so the run was stopped: say why."""
        if reason not in NOT_A_MEMBER:  # Slack itself failed for the whole retry window
            text = (
                f"Slack did not take this run's status message ({reason}) for as long as I retried, "
                "so the run was stopped. Please try again in a few minutes."
            )
        elif channel.startswith("D"):  # a DM cannot be joined with /invite
            text = (
                f"I could not post in this conversation ({reason}), so the run was stopped. "
                "Start it in a channel I am in, or in a direct message with me (my Messages tab)."
            )
        else:
            text = (
                f"I could not post in this channel ({reason}), so the run was stopped. "
                "Invite me with `/invite @MassGen` (private channels need it), then try again."
            )
        if response_url:
            await AsyncWebhookClient(response_url).send(text=text, response_type="ephemeral")
        else:
            await self._outbox.ephemeral(channel, requester, text=text)


__all__ = ["NOT_A_MEMBER", "RequesterNotices"]
