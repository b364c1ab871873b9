"""Channel settings, asked for: open the modal, save a submission, and resolve a run's defaults.

Who may change a channel's settings: its approvers (the ones saved for it, members of its user
group, and the team file's approvers and groups) and workspace admins and owners (`users.info`).
Anything Slack does not answer counts as "no": a refusal, never a save.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from bot.channel_settings.blocks import read_submission, saved_text, settings_modal
from bot.channel_settings.defaults import ChannelDefaults, Choices, Selection, select
from bot.channel_settings.store import ChannelSettingsStore
from bot.render import ids
from bot.render.kit import section
from bot.render.views import modal
from bot.slack.parse import StartRun

log = logging.getLogger(__name__)

ApiCall = Callable[..., Awaitable[Mapping[str, Any]]]  # the outbox's `call`
GroupsOf = Callable[[str, Iterable[str]], Awaitable[frozenset[str]]]

REFUSED = (
    "Only this channel's approvers or a workspace admin can change its settings. "
    "Ask one of them, or see `/massgen help`."
)
WORKING = "Checking who may change this channel's settings…"
NOT_OPENED = "Slack did not open the settings (the request took too long); run `/massgen settings` again."


class ChannelSettings:
    """The settings room's use cases; every reply is the text to show the user only."""

    def __init__(
        self,
        store: ChannelSettingsStore,
        *,
        call: ApiCall,
        groups_of: GroupsOf,
        choices: Choices,
        approvers: Iterable[str] = (),
        approver_groups: Iterable[str] = (),
    ) -> None:
        self.store = store
        self.choices = choices  # the names a user may pick (repositories come from the repos section)
        self._call = call
        self._groups_of = groups_of
        self._approvers = frozenset(approvers)  # the default team file's
        self._approver_groups = frozenset(approver_groups)

    async def select(self, parsed: StartRun, channel: str) -> tuple[StartRun, Selection] | str:
        """The request with this channel's defaults filled in, and what it used; or a one-line refusal."""
        return select(parsed, await self.store.get(channel), self.choices)

    async def may_change(self, channel: str, user: str) -> bool:
        """True for the channel's approvers (direct or through a group) and workspace admins/owners."""
        saved = await self.store.get(channel) or ChannelDefaults()
        if user in self._approvers or user in saved.approvers:
            return True
        groups = set(self._approver_groups)
        if saved.approver_group:
            groups.add(saved.approver_group)
        if groups:
            try:
                if await self._groups_of(user, sorted(groups)) & groups:
                    return True
            except Exception as exc:  # a group Slack cannot list gives nobody a say
                log.info("group lookup for %s failed: %s", user, exc)
        return await self._is_admin(user)

    async def _is_admin(self, user: str) -> bool:
        try:
            info = (await self._call("users.info", user=user)).get("user") or {}
        except Exception as exc:  # cannot tell: not an admin
            log.info("users.info %s failed: %s", user, exc)
            return False
        if info.get("deleted") or info.get("is_bot"):
            return False
        return any(info.get(k) is True for k in ("is_admin", "is_owner", "is_primary_owner"))

    async def open(self, channel: str, user: str, trigger: str) -> str | None:
        """Open the modal at once (a trigger lives 3 s), then fill it in or refuse; the reply, if any."""
        view_id = await self._open(trigger)
        if view_id is None:
            return NOT_OPENED
        if not await self.may_change(channel, user):
            await self._update(view_id, _notice(REFUSED))
            return REFUSED
        await self._update(view_id, settings_modal(channel, await self.store.get(channel), self.choices))
        return None

    def check(self, values: Mapping[str, Any]) -> ChannelDefaults | dict[str, str]:
        """A submission's values checked against the choices (pure: runs before the ack)."""
        return read_submission(values, self.choices)

    async def save(self, channel: str, user: str, new: ChannelDefaults) -> str:
        """Save a checked submission if `user` may (asked again: the modal may be old); the reply."""
        if not channel or not await self.may_change(channel, user):
            return REFUSED
        changes = await self.store.save(channel, new, actor=user)
        log.info("channel %s settings changed by %s: %s", channel, user, [c.field for c in changes])
        return saved_text([(c.field, c.old, c.new) for c in changes])

    async def _open(self, trigger: str) -> str | None:
        try:
            response = await self._call("views.open", trigger_id=trigger, view=_notice(WORKING))
        except Exception as exc:  # an expired trigger: the caller replies instead
            log.warning("views.open failed: %s", exc)
            return None
        opened = response.get("view")
        view_id = opened.get("id") if isinstance(opened, Mapping) else None
        return view_id if isinstance(view_id, str) else None

    async def _update(self, view_id: str, view: dict[str, Any]) -> None:
        try:
            await self._call("views.update", view_id=view_id, view=view)
        except Exception as exc:  # closed meanwhile, or refused: nothing more to do
            log.warning("views.update of %s failed: %s", view_id, exc)


def _notice(text: str) -> dict[str, Any]:
    return modal(ids.SETTINGS_MODAL, "Channel settings", [section(text)])
