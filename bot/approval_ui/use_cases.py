"""Approvals in Slack, decided: clicks, the deny reason, details, and what waits for a user.

The clicker is the signed payload's `user.id`; groups come from `usergroups.users.list` (cached).
The service decides (first decision wins, atomically) and audits refusals; these use cases turn
its typed results into replies.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from approvals import ApprovalRequest, ApprovalService, AuditEntry, Principal, Scope
from bot.approval_ui.blocks import approval_details_modal, deny_reason_modal
from bot.approval_ui.pending import pending_for, principal_for
from bot.approval_ui.port import slack_conversation
from bot.approval_ui.presenter import ApprovalsUI, approval_view
from bot.approval_ui.texts import NO_SUCH_REQUEST, ONLY_THE_DENIER, pending_text, result_text
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
        return result_text(result)

    async def click(
        self, request_id: str, user_id: str, *, approve: bool, scope: Scope, from_home: bool
    ) -> str | None:
        """An Approve click; from the App Home the refreshed tab shows the outcome instead of a reply."""
        text = await self.decide(request_id, user_id, approve=approve, scope=scope)
        if from_home:
            await self._refresh_home(user_id)
            return None
        return text

    async def deny(self, request_id: str, user_id: str, trigger: str | None) -> str | None:
        """Deny at the click (the agent moves on at once), then offer the denier a reason modal.

        Anyone not authorised is refused and audited by `decide`, and nothing changes.
        """
        text = await self.decide(request_id, user_id, approve=False)
        if text is not None or trigger is None:
            return text
        try:
            await self._outbox.call("views.open", trigger_id=trigger, view=deny_reason_modal(request_id))
        except Exception:  # the trigger expired or Slack refused the modal: denied without a reason
            log.warning("deny reason modal could not open for %s", request_id)
        return None

    async def details(
        self, request_id: str, user_id: str | None, channel: str | None, trigger: str
    ) -> str | None:
        """Open the Details modal where the request was posted, or for its approvers."""
        request = await self.service.get(request_id)
        # Button values can be forged: show a request only where it was posted, or to its approvers.
        where = None if request is None else slack_conversation(request)
        visible = request is not None and (
            (channel is not None and where is not None and where.channel == channel)
            or (user_id is not None and await self.is_approver(user_id, request))
        )
        if request is None or not visible:
            return NO_SUCH_REQUEST
        await self._outbox.call(
            "views.open", trigger_id=trigger, view=approval_details_modal(approval_view(request))
        )
        return None

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
