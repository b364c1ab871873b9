"""Approvals in Slack, decided: clicks, the deny reason, details, and what waits for a user.

The clicker is the signed payload's `user.id`; groups come from `usergroups.users.list` (cached).
The service decides (first decision wins, atomically) and audits refusals; these use cases turn
its typed results into replies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from approvals import (
    AlreadyCancelled,
    AlreadyDecided,
    ApprovalRequest,
    ApprovalService,
    AuditEntry,
    NotAuthorised,
    Principal,
    Scope,
)
from bot.approval_ui import full_text
from bot.approval_ui.blocks import (
    approval_details_modal,
    deny_reason_modal,
    details_problem,
    not_approvable_note,
    notice_modal,
)
from bot.approval_ui.diff import diff_modal, diff_of
from bot.approval_ui.pending import pending_for, principal_for
from bot.approval_ui.port import slack_conversation
from bot.approval_ui.presenter import ApprovalsUI, approval_view
from bot.approval_ui.texts import (
    NO_SUCH_REQUEST,
    ONLY_THE_DENIER,
    OUTSIDER,
    TOO_BIG,
    WORKING,
    groups_unavailable_text,
    pending_text,
    result_text,
)
from bot.slack.groups import GroupResolver
from bot.slack.outbox import Outbox

log = logging.getLogger(__name__)


class ApprovalUseCases:
    """What the listeners, the App Home and the slash command ask of approvals."""

    def __init__(
        self,
        service: ApprovalService,
        groups: GroupResolver,
        presenter: ApprovalsUI,
        outbox: Outbox,
        *,
        refresh_home: Callable[[str], Awaitable[None]],
    ) -> None:
        self.service = service
        self._groups = groups
        self._presenter = presenter
        self._outbox = outbox
        self._refresh_home = refresh_home

    async def principal(self, user_id: str, request: ApprovalRequest | None) -> Principal:
        """The clicker with the groups (among those this request names) Slack says they are in."""
        return await principal_for(user_id, request, self._groups.groups_of)

    async def is_approver(self, user_id: str, request: ApprovalRequest) -> bool:
        """Listed among the request's approvers, directly or through a group."""
        return request.approvers.lists(await self.principal(user_id, request))

    async def pending(self, user: str) -> list[ApprovalRequest]:
        """Pending requests `user` may approve (the App Home and `/massgen approvals`)."""
        return await pending_for(self.service, user, groups_of=self._groups.groups_of)

    async def pending_text(self, user: str) -> str:
        """The reply to `/massgen approvals`."""
        return pending_text(await self.pending(user))

    async def decide(
        self,
        request_id: str,
        user_id: str,
        *,
        approve: bool,
        scope: Scope = "once",
        reason: str | None = None,
    ) -> str | None:
        """Decide for the clicker; returns the ephemeral reply, or None when the updated message says it."""
        request = await self.service.get(request_id)
        principal = await self.principal(user_id, request)
        result = await self.service.decide(request_id, principal, approve=approve, scope=scope, reason=reason)
        unavailable = self._groups.unavailable
        if (
            isinstance(result, NotAuthorised)
            and request is not None
            and request.approvers.groups
            and unavailable
        ):
            return groups_unavailable_text(request.approvers.groups, unavailable)
        if isinstance(result, AlreadyDecided | AlreadyCancelled):  # its message may still show buttons
            self._presenter.show_outcome(result.request)
        return result_text(result)

    async def refuse_outsider(self, request_id: str, user_id: str, workspace: str) -> str:
        """A click by a user of another workspace: never an approver; audited, and told why."""
        await self.service.reject(request_id, user_id, f"user of another Slack workspace ({workspace})")
        return OUTSIDER

    async def click(
        self, request_id: str, user_id: str, *, approve: bool, scope: Scope, from_home: bool
    ) -> str | None:
        """An Approve click; from the App Home the refreshed tab shows the outcome instead of a reply."""
        request = await self.service.get(request_id) if approve else None
        if request is not None and request.status == "pending":
            view = approval_view(request)
            if (problem := details_problem(view)) is not None:  # no button was shown: a forged click
                return not_approvable_note(view, problem)
        text = await self.decide(request_id, user_id, approve=approve, scope=scope)
        if from_home:
            await self._refresh_home(user_id)
            return None
        return text

    async def deny(self, request_id: str, user_id: str, trigger: str | None) -> str | None:
        """Deny at the click (the agent moves on at once), then offer the denier a reason modal.

        The modal opens first, while the click's trigger_id is fresh (it expires 3 s after the
        click and works once), and is updated once the group lookup and the write are done.
        Anyone not authorised is refused and audited by `decide`, and nothing changes.
        """
        view_id = await self._open(trigger, notice_modal("Deny", WORKING))
        text = await self.decide(request_id, user_id, approve=False)
        if view_id is None:
            return text  # no modal: the reply goes where the click came from
        await self._update(
            view_id, deny_reason_modal(request_id) if text is None else notice_modal("Deny", text)
        )
        return None

    async def details(
        self, request_id: str, user_id: str | None, channel: str | None, trigger: str
    ) -> str | None:
        """Open the Details modal where the request was posted, or for its approvers."""
        return await self._modal(request_id, user_id, channel, trigger, diff=False)

    async def view_diff(
        self, request_id: str, user_id: str | None, channel: str | None, trigger: str
    ) -> str | None:
        """Open the "View diff" modal (the whole diff the approval binds), with Details' visibility."""
        return await self._modal(request_id, user_id, channel, trigger, diff=True)

    async def _modal(
        self, request_id: str, user_id: str | None, channel: str | None, trigger: str, *, diff: bool
    ) -> str | None:
        title = "Diff" if diff else "Approval details"
        view_id = await self._open(trigger, notice_modal(title, WORKING))
        request = await self.service.get(request_id)
        # Button values can be forged: show a request only where it was posted, or to its approvers.
        where = None if request is None else slack_conversation(request)
        visible = request is not None and (
            (channel is not None and where is not None and where.channel == channel)
            or (user_id is not None and await self.is_approver(user_id, request))
        )
        carried = None if request is None else diff_of(request.context)
        if diff and carried is None:
            visible = False
        if view_id is None:
            return None if visible else NO_SUCH_REQUEST
        if request is None or not visible:
            await self._update(view_id, notice_modal(title, NO_SUCH_REQUEST))
        elif carried is not None and diff:
            await self._update(view_id, diff_modal(request.id, *carried))
        else:
            await self._update(view_id, approval_details_modal(approval_view(request), now=time.time()))
        return None

    async def _open(self, trigger: str | None, view: dict[str, Any]) -> str | None:
        """`views.open` with a click's trigger_id, before any slow work; the view's id, or None."""
        if trigger is None:
            return None
        try:
            response = await self._outbox.call("views.open", trigger_id=trigger, view=view)
        except Exception as exc:  # an expired trigger or a refused view: the caller replies instead
            log.warning("views.open failed: %s", exc)
            return None
        opened = response.get("view")
        view_id = opened.get("id") if isinstance(opened, dict) else None
        return view_id if isinstance(view_id, str) else None

    async def _update(self, view_id: str, view: dict[str, Any]) -> None:
        """Replace an open modal's content (views.update by id; no trigger needed)."""
        if not full_text.fits(view):  # never send a view Slack refuses (250 kB, 100 blocks)
            view = notice_modal("Approval details", TOO_BIG)
        try:
            await self._outbox.call("views.update", view_id=view_id, view=view)
        except Exception as exc:  # the user closed the modal, or Slack refused: nothing more to do
            log.warning("views.update of %s failed: %s", view_id, exc)

    async def add_deny_reason(self, request_id: str, user_id: str, reason: str | None) -> str | None:
        """The optional reason a denier gives after the click: audited and shown on the message.

        The denial itself landed at the click (the agent moved on at once); only the approver who
        denied may explain it. Returns the ephemeral reply, if any.
        """
        request = await self.service.get(request_id)
        if request is None or request.status != "denied" or request.decided_by != user_id:
            return ONLY_THE_DENIER
        if not reason:
            return None
        await self.service.record_decision(
            AuditEntry(
                at=self.service.clock.now(),
                run_id=request.run_id,
                agent_id=request.agent_id,
                actor=user_id,
                action=str(request.action),
                outcome="denied",
                layer=request.layer,
                risk=request.risk,
                reason=f"reason given after the denial: {reason}",
                request_id=request.id,
            )
        )
        self._presenter.show_reason(request, reason)
        return None

    async def submit_deny_reason(self, request_id: str, user_id: str, reason: str | None) -> None:
        """A submitted deny-reason modal: record it, refresh the Home tab, tell the denier if refused."""
        text = await self.add_deny_reason(request_id, user_id, reason)
        await self._refresh_home(user_id)  # the modal may have come from the Home tab: refresh it
        if not text:
            return
        request = await self.service.get(request_id)
        where = None if request is None else slack_conversation(request)
        if where is not None:
            await self._outbox.ephemeral(where.channel, user_id, text=text)
