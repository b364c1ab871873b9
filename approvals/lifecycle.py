"""The approval state machine as a pure function: `transition(request, event, now)`.

`pending → approved | denied | expired | cancelled`; terminal states never change. Time comes in
as `now`; nothing here awaits, stores or emits. The service persists the returned request with
a compare-and-set, so the first decision to reach the store wins.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import MappingProxyType

from approvals.errors import ApprovalMisuseError
from approvals.models import (
    SCOPE_ORDER,
    AlreadyCancelled,
    AlreadyDecided,
    ApprovalRequest,
    Approvers,
    Ask,
    NotAuthorised,
    Principal,
    Rejection,
    Scope,
    ScopeNotOffered,
    Status,
    offered_scopes,
)
from approvals.permissions import Decision


@dataclass(frozen=True, slots=True, kw_only=True)
class Vote:
    """A principal approves or denies; `scope` only matters for an approval."""

    principal: Principal
    approve: bool
    scope: str = "once"
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Expire:
    """The deadline passed: an expiry is a denial that nobody typed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel:
    """The run ended (or was stopped) while the request was pending."""

    reason: str = "run cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class Remind:
    """Mark the one reminder as sent."""


LifecycleEvent = Vote | Expire | Cancel | Remind


def open_request(ask: Ask, *, id: str, nonce: str, now: datetime) -> ApprovalRequest:
    """A new pending request for an engine `ask`; misuse raises and creates nothing."""
    decision = ask.decision
    _check_new_request(decision=decision, approvers=ask.approvers, timeout=ask.timeout, digest=ask.digest)
    return ApprovalRequest(
        id=id,
        run_id=ask.run_id,
        agent_id=ask.agent_id,
        requester_id=ask.requester,
        action=ask.action,
        digest=ask.digest,
        risk=decision.risk,
        layer=decision.layer,
        reason=decision.reason,
        rule=decision.rule,
        scopes=offered_scopes(
            always_offerable=decision.always_offerable, risk=decision.risk, action=ask.action
        ),
        approvers=ask.approvers,
        status="pending",
        created_at=now,
        expires_at=now + ask.timeout,
        nonce=nonce,
        context=MappingProxyType(dict(ask.context)),
        conversation=ask.conversation,
    )


def _check_new_request(*, decision: Decision, approvers: Approvers, timeout: timedelta, digest: str) -> None:
    if decision.resolved != "ask":
        raise ApprovalMisuseError(f"only an 'ask' opens a request; the engine resolved {decision.resolved!r}")
    if approvers.empty:
        raise ApprovalMisuseError("no approvers configured: nobody could approve this request")
    if approvers.quorum < 1:
        raise ApprovalMisuseError(f"quorum must be at least 1, got {approvers.quorum}")
    if not approvers.groups and len(approvers.users) < approvers.quorum:
        raise ApprovalMisuseError(f"quorum {approvers.quorum} exceeds the {len(approvers.users)} approvers")
    if timeout <= timedelta(0):
        raise ApprovalMisuseError(f"timeout must be positive, got {timeout}")
    if not digest:
        raise ApprovalMisuseError("an approval must bind to the action digest")


def authorise(request: ApprovalRequest, principal: Principal, *, approve: bool) -> str | None:
    """Why `principal` may not cast this vote, or None when it may."""
    if request.approvers.empty:
        return "no approvers are configured for this request"
    if not request.approvers.lists(principal):
        return f"{principal.id} is not an approver for this request"
    # Denying your own run's request is always safe; approving it needs explicit configuration.
    if approve and principal.id == request.requester_id and not request.approvers.allow_self_approval:
        return "the requester may not approve their own request"
    return None


def transition(request: ApprovalRequest, event: LifecycleEvent, now: datetime) -> ApprovalRequest | Rejection:
    """The request after `event` at `now`, or the typed reason nothing changed."""
    if isinstance(event, Vote):
        # Authorisation first: someone who may not decide learns nothing about the request's state.
        why = authorise(request, event.principal, approve=event.approve)
        if why is not None:
            return NotAuthorised(request=request, principal=event.principal, why=why)
    if request.status == "cancelled":
        return AlreadyCancelled(request=request)
    if request.terminal:
        return AlreadyDecided(request=request)
    match event:
        case Vote():
            return _vote(request, event, now)
        case Expire():
            return _close(request, "expired", now, by=None, reason="no decision before the deadline")
        case Cancel(reason=reason):
            return _close(request, "cancelled", now, by=None, reason=reason)
        case Remind():
            if request.reminded_at is not None:
                return AlreadyDecided(request=request)
            return replace(request, reminded_at=now)


def _vote(request: ApprovalRequest, vote: Vote, now: datetime) -> ApprovalRequest | Rejection:
    # A click that arrives after the deadline must not read as an approval (hermes#68597):
    # the request expires instead, and the caller reports "already decided".
    if now >= request.expires_at:
        return _close(request, "expired", now, by=None, reason="no decision before the deadline")
    if not vote.approve:
        # Any single denial vetoes, whatever the quorum.
        return _close(request, "denied", now, by=vote.principal.id, reason=vote.reason)
    scope = _offered(request, vote.scope)
    if scope is None:
        return ScopeNotOffered(request=request, scope=vote.scope)
    if vote.principal.id in request.approvals_so_far:
        return AlreadyDecided(request=request)
    approvals = (*request.approvals_so_far, vote.principal.id)
    narrowest = scope
    if request.decision_scope is not None and SCOPE_ORDER[request.decision_scope] < SCOPE_ORDER[scope]:
        narrowest = request.decision_scope
    counted = replace(request, approvals_so_far=approvals, decision_scope=narrowest)
    if len(approvals) < max(1, request.approvers.quorum):
        return counted
    return _close(counted, "approved", now, by=vote.principal.id, reason=vote.reason, scope=narrowest)


def _offered(request: ApprovalRequest, scope: str) -> Scope | None:
    for offered in request.scopes:
        if offered == scope:
            return offered
    return None


def _close(
    request: ApprovalRequest,
    status: Status,
    now: datetime,
    *,
    by: str | None,
    reason: str | None,
    scope: Scope | None = None,
) -> ApprovalRequest:
    return replace(
        request,
        status=status,
        decided_by=by,
        decided_at=now,
        decision_scope=scope,
        decision_reason=reason,
    )


def rejection_reason(result: Rejection) -> str:
    """One line for the audit trail and the person refused."""
    match result:
        case NotAuthorised(why=why):
            return why
        case ScopeNotOffered(scope=scope):
            return f"scope {scope!r} was not offered for this request"
        case AlreadyCancelled(request=request):
            why = f": {request.decision_reason}" if request.decision_reason else ""
            return f"already cancelled{why}"
        case AlreadyDecided(request=request):
            if request.terminal:
                return f"already {request.status}"
            return "this approver's vote is already counted"
