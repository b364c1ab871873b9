"""Approvals in Slack: post each ask in its run's thread, authorise clicks server-side, show the outcome.

Button values carry only the request id; the request, its approvers and its thread are looked up.
The clicker is the signed payload's `user.id`; groups come from `usergroups.users.list` (cached).
The service decides (first decision wins, atomically) and audits refusals; this module only turns
its typed results into messages.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from approvals.audit import AuditEntry
from approvals.events import ApprovalEvent
from approvals.models import (
    AlreadyDecided,
    ApprovalRequest,
    Approvers,
    Decided,
    DecideResult,
    NotAuthorised,
    NotFound,
    Principal,
    QuorumPending,
    Scope,
    ScopeNotOffered,
)
from approvals.permissions import Action, Decision
from approvals.service import ApprovalService
from bot.groups import GroupResolver
from bot.outbox import MessageRef, Outbox
from bot.parse import is_user_id
from bot.render.blocks import (
    ApprovalView,
    approval_decided_blocks,
    approval_expired_blocks,
    approval_request_blocks,
    approver_mentions,
)
from bot.render.kit import date_token
from bot.store import BotStore

log = logging.getLogger(__name__)

CONTEXT_CHANNEL = "slack_channel"
CONTEXT_THREAD = "slack_thread_ts"


def approval_view(request: ApprovalRequest) -> ApprovalView:
    """The renderer's view of a request (rendering never sees approvals internals)."""
    return ApprovalView(
        request_id=request.id,
        agent_id=request.agent_id,
        action=str(request.action),
        risk=request.risk,
        reason=request.reason,
        layer=request.layer,
        rule=request.rule,
        expires_at=request.expires_at.timestamp(),
        status=request.status,
        decided_by=request.decided_by,
        scope=request.decision_scope,
        scopes=request.scopes,
        decided_at=None if request.decided_at is None else request.decided_at.timestamp(),
        decision_reason=request.decision_reason,
        quorum=request.approvers.quorum,
        approvals_so_far=request.approvals_so_far,
    )


@dataclass(frozen=True, slots=True)
class ThreadApprovalPort:
    """The orchestrator's `ApprovalPort` for one run: adds the run's Slack thread to the context."""

    service: ApprovalService
    channel: str
    thread: MessageRef | str

    async def always_rules(self) -> list[str]:
        """Allow rules persisted by earlier "always" approvals (the run's engine adds them)."""
        return await self.service.always_rules()

    async def request(
        self,
        *,
        run_id: str,
        agent_id: str,
        requester_id: str | None,
        action: Action,
        digest: str,
        decision: Decision,
        approvers: Approvers,
        timeout: timedelta,  # noqa: ASYNC109 - the request's lifetime (the port's signature)
        context: Mapping[str, str] | None = None,
    ) -> ApprovalRequest:
        """`ApprovalService.request` with the run's channel and thread ts added to the context."""
        thread_ts = self.thread if isinstance(self.thread, str) else await self.thread.ts()
        merged = {**(context or {}), CONTEXT_CHANNEL: self.channel, CONTEXT_THREAD: thread_ts}
        return await self.service.request(
            run_id=run_id,
            agent_id=agent_id,
            requester_id=requester_id,
            action=action,
            digest=digest,
            decision=decision,
            approvers=approvers,
            timeout=timeout,
            context=merged,
        )

    async def wait(self, request_id: str) -> ApprovalRequest:
        return await self.service.wait(request_id)

    async def record_decision(self, entry: AuditEntry) -> None:
        await self.service.record_decision(entry)


class ApprovalsUI:
    """Renders approval events into the run's thread and answers Approve/Deny clicks."""

    def __init__(
        self,
        service: ApprovalService,
        outbox: Outbox,
        groups: GroupResolver,
        store: BotStore,
        *,
        spawn: Callable[[Coroutine[Any, Any, Any]], object],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.service = service
        self._spawn = spawn
        self._outbox = outbox
        self._groups = groups
        self._store = store
        self._clock = clock
        self._messages: dict[str, MessageRef] = {}
        self._unsubscribe: Callable[[], None] | None = None
        # Called with each request that appeared or left the pending set (App Home refreshes).
        self.on_change: Callable[[ApprovalRequest], None] | None = None

    def attach(self) -> None:
        """Start rendering the service's events."""
        self._unsubscribe = self.service.subscribe(self.on_event)

    def detach(self) -> None:
        """Stop rendering (shutdown)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def on_event(self, event: ApprovalEvent) -> None:
        """Post a new ask; rewrite its message when decided, expired or cancelled.

        The service calls this inline before `request()`/`decide()` return, so it only queues
        Slack calls; anything that awaits (the message's ts, the store) runs in a supervised task.
        """
        if event.kind == "decision_rejected":
            return
        request = event.request
        if self.on_change is not None and event.kind != "approval_reminder":
            self.on_change(request)
        if event.kind == "approval_requested":
            self._post(request)
        elif event.kind == "approval_reminder":
            self._remind(request)
        elif event.kind == "approval_decided" and event.final:
            self._rewrite(request, *approval_decided_blocks(approval_view(request), now=self._clock()))
        elif event.kind == "approval_decided":  # a vote towards a quorum: show the progress, keep buttons
            self._rewrite(request, *self._request_blocks(request), final=False)
        elif event.kind in {"approval_expired", "approval_cancelled"}:
            self._rewrite(request, *approval_expired_blocks(approval_view(request), now=self._clock()))

    def _post(self, request: ApprovalRequest) -> None:
        channel = request.context.get(CONTEXT_CHANNEL)
        if not channel:
            return  # not a Slack run (CLI, file handshake): nothing to show here
        text, blocks = self._request_blocks(request)
        ref = self._outbox.post(
            channel, text=text, blocks=blocks, thread=request.context.get(CONTEXT_THREAD), priority=10
        )
        self._messages[request.id] = ref
        self._spawn(self._remember(request.id, channel, ref))

    def _request_blocks(self, request: ApprovalRequest) -> tuple[str, list[dict[str, Any]]]:
        return approval_request_blocks(
            approval_view(request),
            approver_ids=_approver_ids(request),
            approver_groups=sorted(request.approvers.groups),
            now=self._clock(),
        )

    def _remind(self, request: ApprovalRequest) -> None:
        """A new thread reply (an edit would not notify anyone) shortly before the request expires."""
        channel = request.context.get(CONTEXT_CHANNEL)
        if not channel:
            return
        who = approver_mentions(_approver_ids(request), sorted(request.approvers.groups)) or "Approvers"
        at = date_token(request.expires_at.timestamp())
        text = f"⏰ {who}: an approval request in this thread expires at {at}; unanswered, it is denied."
        self._outbox.post(channel, text=text, thread=request.context.get(CONTEXT_THREAD), priority=10)

    async def _remember(self, request_id: str, channel: str, ref: MessageRef) -> None:
        await self._store.record_approval_message(request_id, channel, await ref.ts())

    def _rewrite(
        self, request: ApprovalRequest, text: str, blocks: list[dict[str, Any]], *, final: bool = True
    ) -> None:
        if not request.context.get(CONTEXT_CHANNEL):
            return
        ref = self._messages.pop(request.id, None) if final else self._messages.get(request.id)
        if ref is not None:
            self._outbox.update(ref, text=text, blocks=blocks)
        else:  # posted by an earlier process: find the message in the store
            self._spawn(self._rewrite_stored(request.id, text, blocks))

    async def _rewrite_stored(self, request_id: str, text: str, blocks: list[dict[str, Any]]) -> None:
        where = await self._store.approval_message(request_id)
        if where is not None:
            self._outbox.update(MessageRef.existing(where[0], where[1]), text=text, blocks=blocks)

    async def principal(self, user_id: str, request: ApprovalRequest | None) -> Principal:
        """The clicker with the groups (among those this request names) Slack says they are in."""
        groups: frozenset[str] = frozenset()
        if request is not None and request.approvers.groups and user_id not in request.approvers.users:
            groups = await self._groups.groups_of(user_id, request.approvers.groups)
        return Principal(id=user_id, groups=groups)

    async def is_approver(self, user_id: str, request: ApprovalRequest) -> bool:
        """Listed among the request's approvers, directly or through a group."""
        return request.approvers.lists(await self.principal(user_id, request))

    async def add_deny_reason(self, request_id: str, user_id: str, reason: str | None) -> str | None:
        """The optional reason a denier gives after the click: audited and shown on the message.

        The denial itself landed at the click (the agent moved on at once); only the approver who
        denied may explain it. Returns the ephemeral reply, if any.
        """
        request = await self.service.get(request_id)
        if request is None or request.status != "denied" or request.decided_by != user_id:
            return "Only the approver who denied this request can add its reason."
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
        view = replace(approval_view(request), decision_reason=reason)
        self._rewrite(request, *approval_decided_blocks(view, now=self._clock()))
        return None

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


def _approver_ids(request: ApprovalRequest) -> list[str]:
    """Who to mention: listed users, minus the requester unless they may approve their own request."""
    approvers = request.approvers
    return sorted(
        u
        for u in approvers.users
        if is_user_id(u) and (u != request.requester_id or approvers.allow_self_approval)
    )


NOT_AUTHORISED = "You are not authorised to decide this request. Nothing changed; the attempt was recorded."


def already_text(request: ApprovalRequest) -> str:
    """What a late or duplicate click is told."""
    if request.status == "expired":
        return "This request already expired (denied). Nothing changed."
    by = f" by <@{request.decided_by}>" if request.decided_by and is_user_id(request.decided_by) else ""
    return f"This request was already decided ({request.status}{by}). Nothing changed."


def result_text(result: DecideResult) -> str | None:
    """The ephemeral reply for a decision result."""
    if isinstance(result, Decided):
        return None
    if isinstance(result, QuorumPending):
        return f"Your approval is counted: {result.approvals} of {result.needed} needed."
    if isinstance(result, AlreadyDecided):
        return already_text(result.request)
    if isinstance(result, NotAuthorised):
        return NOT_AUTHORISED
    if isinstance(result, ScopeNotOffered):
        return "That approval scope is not offered for this request. Nothing changed."
    assert isinstance(result, NotFound)
    return "That approval request no longer exists."
