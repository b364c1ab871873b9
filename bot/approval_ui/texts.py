"""What approvers are told in ephemeral replies: every approver-facing sentence outside the blocks."""

from __future__ import annotations

import time

from approvals import (
    AlreadyCancelled,
    AlreadyDecided,
    ApprovalRequest,
    Decided,
    DecideResult,
    NotAuthorised,
    NotFound,
    QuorumPending,
    ScopeNotOffered,
)
from bot.render.escape import code, safe
from bot.slack.parse import is_user_id

NO_SUCH_REQUEST = "That approval request no longer exists."
ONLY_THE_DENIER = "Only the approver who denied this request can add its reason."
WORKING = "⏳ One moment…"
TOO_BIG = "This is too large to show in Slack. Inspect it in a terminal with `massgen-bot approvals show`."
NOT_AUTHORISED = "You are not authorised to decide this request. Nothing changed; the attempt was recorded."


def cancelled_text(request: ApprovalRequest) -> str:
    """What a click on a cancelled request is told (its run ended while it waited)."""
    why = f": {safe(request.decision_reason, 200)}" if request.decision_reason else ""
    return f"This request was cancelled{why}. Nothing changed; nothing was run."


def already_text(request: ApprovalRequest) -> str:
    """What a late or duplicate click is told."""
    if request.status == "expired":
        return "This request already expired (denied). Nothing changed."
    if request.status == "cancelled":
        return cancelled_text(request)
    by = f" by <@{request.decided_by}>" if request.decided_by and is_user_id(request.decided_by) else ""
    return f"This request was already decided ({request.status}{by}). Nothing changed."


def result_text(result: DecideResult) -> str | None:
    """The ephemeral reply for a decision result."""
    if isinstance(result, Decided):
        return None
    if isinstance(result, QuorumPending):
        return f"Your approval is counted: {result.approvals} of {result.needed} needed."
    if isinstance(result, AlreadyCancelled):
        return cancelled_text(result.request)
    if isinstance(result, AlreadyDecided):
        return already_text(result.request)
    if isinstance(result, NotAuthorised):
        return NOT_AUTHORISED
    if isinstance(result, ScopeNotOffered):
        return "That approval scope is not offered for this request. Nothing changed."
    assert isinstance(result, NotFound)
    return NO_SUCH_REQUEST


def pending_text(mine: list[ApprovalRequest], *, now: float | None = None) -> str:
    """The reply to `/massgen approvals`: the requests waiting for this user."""
    if not mine:
        return "Nothing is waiting for you."
    at = time.time() if now is None else now
    lines = [f"*{len(mine)} request(s) wait for you* (buttons are in each run's thread and in App Home):"]
    for request in mine[:20]:
        minutes = max(0, int((request.expires_at.timestamp() - at) // 60))
        action = code(str(request.action), 200)
        lines.append(f"• {action} by {safe(request.agent_id, 64)}, risk {request.risk}, {minutes} min left")
    return "\n".join(lines)
