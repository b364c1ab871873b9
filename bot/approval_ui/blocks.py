"""Blocks for approvals: the request (built for a phone), its decided/expired rewrite, the modals.

The request mentions the approvers by id so their phones ring (`chat.update` never notifies, so
requests are new posts). Each button's `value` is the request id only; the listener looks the
request up and authorises the clicker server-side. High-risk requests put a confirm dialog on the
approve buttons so a stray tap does not run `rm -rf`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bot.approval_ui import full_text
from bot.approval_ui.diff import diff_problem
from bot.render import ids
from bot.render.escape import code, code_block, group_mention, is_group_id, is_user_id, safe, user_mention
from bot.render.kit import Block, actions, button, confirm, context, date_token, duration, section
from bot.render.views import modal

Rendered = tuple[str, list[Block]]
ACTION_PREVIEW = 1500  # characters of the action shown in the message; Details shows all of it
HIGH_RISK = frozenset({"high", "critical"})
# Approver-facing wording used by other rooms (the App Home, `/massgen help`): it lives here, with the rest.
HOME_PENDING_HEADING = "*Waiting for your approval* ({count})"
HOME_NOTHING_PENDING = "Nothing is waiting for your approval."
APPROVALS_HELP = (
    "Risky tool calls wait for an approver: *Approve once*, *Approve for this run* or *Deny*. "
    "No answer before the deadline means deny."
)
_RISK_ICON = {"low": "🟢", "medium": "🟡", "high": "🟠", "critical": "🔴"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalView:
    """What rendering needs to know about one approval request (no approvals internals)."""

    request_id: str
    agent_id: str
    action: str
    risk: str
    reason: str
    layer: str
    rule: str | None = None
    expires_at: float
    status: str = "pending"  # pending, approved, denied, expired, cancelled
    decided_by: str | None = None
    scope: str | None = None  # once, run, always
    scopes: tuple[str, ...] = ("once", "run")
    decided_at: float | None = None
    decision_reason: str | None = None  # e.g. the denier's reason
    quorum: int = 1  # approvals needed
    approvals_so_far: tuple[str, ...] = ()  # who approved so far, while a quorum is pending
    diff: str | None = None  # the diff the action applies or pushes (View diff shows all of it)
    diff_sha256: str | None = None  # its recorded hash: the modal shows it only if the bytes match


def _quorum_line(view: ApprovalView) -> str:
    """ "Needs 2 approvals · 1 so far: @x" while a quorum is pending; one approval needs no line."""
    if view.quorum <= 1:
        return ""
    who = ", ".join(user_mention(u) for u in view.approvals_so_far)
    return f"Needs {view.quorum} approvals · {len(view.approvals_so_far)} so far{': ' + who if who else ''}"


def _asked_by(view: ApprovalView) -> str:
    return f"rule {code(view.rule, 120)}" if view.rule else f"the {safe(view.layer, 40)} layer"


def _risk(view: ApprovalView) -> str:
    return f"{_RISK_ICON.get(view.risk, '⚪')} {safe(view.risk, 20)}"


def _expiry(view: ApprovalView, now: float) -> str:
    left = view.expires_at - now
    when = date_token(view.expires_at, "{time}")
    return f"{when} (in {duration(left)})" if left > 0 else f"{when} (passed)"


def _action_section(view: ApprovalView, limit: int = ACTION_PREVIEW, *, pointer: bool = True) -> Block:
    cut = len(view.action) > limit
    note = "\n_Truncated: tap Details for the full text._" if cut and pointer else ""
    return section(code_block(view.action, limit) + note)


def approver_mentions(users: Iterable[str], groups: Iterable[str] = ()) -> str:
    """Mentions that ring the approvers' phones: validated user ids, then validated group ids."""
    people = [user_mention(u) for u in users if is_user_id(u)]
    teams = [group_mention(g) for g in groups if is_group_id(g)]
    return " ".join(dict.fromkeys(people + teams))


def _approve_buttons(view: ApprovalView, sure: Block | None) -> list[Block]:
    """Approve once (and for this run, when offered); only for actions Details can show whole."""
    buttons = [
        button("Approve once", ids.APPROVE_ONCE, view.request_id, style="primary", confirm_dialog=sure)
    ]
    if "run" in view.scopes:
        buttons.append(button("Approve for this run", ids.APPROVE_RUN, view.request_id, confirm_dialog=sure))
    return buttons


def approval_request_blocks(
    view: ApprovalView, *, approver_ids: Iterable[str], now: float, approver_groups: Iterable[str] = ()
) -> Rendered:
    """The Approve/Deny message posted in the run's thread; it mentions the approvers and their groups."""
    mentions = approver_mentions(approver_ids, approver_groups)
    agent = safe(view.agent_id, 60)
    approve_confirm = None
    if view.risk in HIGH_RISK:
        approve_confirm = confirm(
            "Approve a high-risk action?",
            f"Let {view.agent_id} run this ({view.risk} risk)?",
            "Approve",
            "Back",
            danger=True,
        )
    problem = details_problem(view)
    buttons = [] if problem is not None else _approve_buttons(view, approve_confirm)
    buttons += [
        button("Deny", ids.DENY, view.request_id, style="danger"),
        button("Details", ids.DETAILS, view.request_id),
        *_diff_button(view),
    ]
    blocks = [
        section(f"{mentions}\n✋ *Approval needed*: *{agent}* wants to run:".strip()),
        _action_section(view, pointer=problem is None),
        *([section(not_approvable_note(view, problem))] if problem is not None else []),
        section(
            fields=[
                f"*Risk*\n{_risk(view)}",
                f"*Asked by*\n{_asked_by(view)}",
                f"*Why*\n{safe(view.reason, 600) or '—'}",
                f"*Expires*\n{_expiry(view, now)}",
            ],
        ),
        actions(f"approval:{view.request_id}", *buttons),
        context(
            _quorum_line(view),
            "Only authorised approvers can decide · no answer by the deadline means *deny*",
            f"request {code(view.request_id, 80)}",
        ),
    ]
    what = f"{code(view.action, 200)} ({safe(view.risk, 20)} risk)"
    text = f"{mentions} Approval needed: {agent} wants to run {what}"
    return text.strip(), blocks


def approval_decided_blocks(view: ApprovalView, *, now: float) -> Rendered:
    """The request rewritten into its record once decided: who, what, when; no buttons."""
    if view.status in ("expired", "cancelled"):
        return approval_expired_blocks(view, now=now)
    approved = view.status == "approved"
    who = user_mention(view.decided_by) if view.decided_by else "someone"
    at = date_token(view.decided_at or now)
    scope = {"once": "once", "run": "for this run", "always": "always"}.get(view.scope or "", "")
    verdict = (
        f"✅ Approved by {who}" + (f" ({scope})" if scope else "") if approved else f"⛔ Denied by {who}"
    )
    reason = f": {safe(view.decision_reason, 500)}" if view.decision_reason and not approved else ""
    agent = safe(view.agent_id, 60)
    blocks = [
        section(f"{verdict} at {at}{reason}"),
        _action_section(view, 500),
        context(
            f"Agent *{agent}* · {_risk(view)} risk · asked by {_asked_by(view)}",
            f"request {code(view.request_id, 80)}",
        ),
    ]
    plain_verdict = "Approved" if approved else "Denied"
    return f"{plain_verdict}: {agent} {code(view.action, 200)}", blocks


def approval_expired_blocks(view: ApprovalView, *, now: float) -> Rendered:
    """An unanswered (or cancelled) request: denied, buttons removed."""
    agent = safe(view.agent_id, 60)
    if view.status == "cancelled":
        why = (
            safe(view.decision_reason, 200) if view.decision_reason else "the run ended before anyone decided"
        )
        head = f"🚫 Cancelled: {why}. Nothing was run."
    else:
        head = f"⌛ Expired at {date_token(view.expires_at)}, denied. Nothing was run."
    blocks = [
        section(head),
        _action_section(view, 500),
        context(f"Agent *{agent}* · {_risk(view)} risk · request {code(view.request_id, 80)}"),
    ]
    state = "cancelled" if view.status == "cancelled" else "expired"
    return f"Approval {state}: {agent} {code(view.action, 200)}", blocks


def _details_facts(view: ApprovalView, now: float | None) -> list[Block]:
    facts = [
        f"*Risk*\n{_risk(view)}",
        f"*Asked by*\n{_asked_by(view)}",
        f"*Why*\n{safe(view.reason, 1500) or '—'}",
        f"*Status*\n{safe(view.status, 20)}",
    ]
    expiry = _expiry(view, now) if now is not None else date_token(view.expires_at)
    return [section(fields=facts), context(f"Request {code(view.request_id, 80)} · expires {expiry}")]


def _full_details(view: ApprovalView, now: float | None) -> Block:
    blocks = [section(f"*{safe(view.agent_id, 60)}* wants to run:"), *full_text.code_sections(view.action)]
    blocks += _details_facts(view, now)
    return {
        "type": "modal",
        "callback_id": ids.DETAILS_MODAL,
        "title": {"type": "plain_text", "text": "Approval details"},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": blocks,
        "private_metadata": view.request_id[:3000],
    }


def _diff_button(view: ApprovalView) -> list[Block]:
    """ "View diff", on requests whose action carries a diff."""
    return [] if view.diff is None else [button("View diff", ids.VIEW_DIFF, view.request_id)]


def details_problem(view: ApprovalView) -> str | None:
    """Why Details (or View diff) cannot show what is approved (so Slack must not offer Approve), or None.

    A diff too long for one modal is still approvable (the modal says where it is cut and where
    to read the rest); one Slack cannot show as it is, or whose bytes miss its hash, is not.
    """
    if (why := full_text.hidden(view.action)) is not None:
        return why
    if view.diff is not None and (why := diff_problem(view.diff, view.diff_sha256)) is not None:
        return f"its diff cannot be shown: {why}"
    if len(view.action) > full_text.MAX_VIEW_BYTES or not full_text.fits(_full_details(view, None)):
        return f"it is too long to show in Slack ({len(view.action):,} characters)"
    return None


def not_approvable_note(view: ApprovalView, problem: str) -> str:
    """What an approver is told instead of an Approve button: why, and where to look instead."""
    return f"⚠️ *Cannot be approved in Slack*: {problem}. {full_text.inspect_hint(view.request_id)}"


def approval_details_modal(view: ApprovalView, *, now: float | None = None) -> Block:
    """`views.open` payload (callback_id `ids.DETAILS_MODAL`): the whole action, or why it cannot be shown."""
    problem = details_problem(view)
    if problem is None:
        return _full_details(view, now)
    blocks = [
        section(f"*{safe(view.agent_id, 60)}* wants to run (beginning shown):"),
        _action_section(view, pointer=False),
        section(not_approvable_note(view, problem)),
        *_details_facts(view, now),
    ]
    return modal(ids.DETAILS_MODAL, "Approval details", blocks, private_metadata=view.request_id[:3000])


def notice_modal(title: str, text: str) -> Block:
    """A read-only modal with one message: "working…" while a click is handled, or its outcome."""
    return modal(ids.DETAILS_MODAL, title, [section(text)])


def deny_reason_modal(request_id: str) -> Block:
    """Shown after a Deny click: an optional reason (callback_id `ids.DENY_MODAL`, metadata = request id)."""
    reason_input = {
        "type": "input",
        "block_id": ids.DENY_REASON_BLOCK,
        "optional": True,
        "label": {"type": "plain_text", "text": "Why? (optional; kept in the audit trail)"},
        "element": {
            "type": "plain_text_input",
            "action_id": ids.DENY_REASON_INPUT,
            "multiline": True,
            "max_length": 500,
        },
    }
    note = section("⛔ Denied: the agent was told and moved on. Add a reason for the record?")
    blocks = [note, reason_input]
    return modal(
        ids.DENY_MODAL,
        "Denied",
        blocks,
        submit={"type": "plain_text", "text": "Send reason"},
        private_metadata=request_id[:3000],
    )


def home_approval_blocks(view: ApprovalView, now: float) -> list[Block]:
    """One pending request in the App Home: what, risk, time left, and its buttons."""
    sure = None
    if view.risk in HIGH_RISK:
        sure = confirm("Approve a high-risk action?", f"{view.risk} risk", "Approve", "Back", danger=True)
    buttons = [] if details_problem(view) is not None else _approve_buttons(view, sure)
    buttons += [
        button("Deny", ids.DENY, view.request_id, style="danger"),
        button("Details", ids.DETAILS, view.request_id),
        *_diff_button(view),
    ]
    left = max(0, int(view.expires_at - now) // 60)
    who = safe(view.agent_id, 60)
    text = f"*{who}* wants to run {code(view.action, 300)}\n{safe(view.risk, 20)} risk · {left} min left"
    return [section(text), actions(f"home_approval:{view.request_id}", *buttons)]
