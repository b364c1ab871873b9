"""Surfaces other than messages: the full-answer modal, the App Home tab, and the help text."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from bot.render import ids
from bot.render.approval_blocks import HIGH_RISK, ApprovalView, modal
from bot.render.escape import code, plain, safe
from bot.render.kit import Block, actions, button, confirm, context, date_token, divider, header, section
from bot.render.mrkdwn import markdown_to_mrkdwn, split_message
from bot.render.redact import redact

MAX_HOME_APPROVALS = 10  # 3 blocks each; keeps the Home tab well under 100 blocks
_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,}")
_STATE_ICON = {"running": "⏳", "finished": "✅", "failed": "❌", "cancelled": "🚫"}


class RunSummary(Protocol):
    """What the Home tab shows of a past run (`bot.store.BotRun` has these fields)."""

    @property
    def run_id(self) -> str: ...
    @property
    def channel(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def created_at(self) -> float: ...


def answer_modal(label: str, content: str) -> Block:
    """`views.open` payload (callback_id `ids.ANSWER_MODAL`) with a full answer, Markdown → mrkdwn."""
    chunks = split_message(markdown_to_mrkdwn(redact(content)) or "_(empty)_", 3000)
    blocks = [section(c) for c in chunks[:95]]
    if len(chunks) > 95:
        blocks.append(context("Truncated: the answer is longer than a modal can show."))
    title = plain(f"Answer {label}", 24)
    return modal(ids.ANSWER_MODAL, title, blocks)


def _home_approval(view: ApprovalView, now: float) -> list[Block]:
    sure = None
    if view.risk in HIGH_RISK:
        sure = confirm(
            "Approve a high-risk action?", f"{safe(view.risk, 20)} risk", "Approve", "Back", danger=True
        )
    buttons = [
        button("Approve once", ids.APPROVE_ONCE, view.request_id, style="primary", confirm_dialog=sure)
    ]
    if "run" in view.scopes:
        buttons.append(button("Approve for this run", ids.APPROVE_RUN, view.request_id, confirm_dialog=sure))
    buttons += [
        button("Deny", ids.DENY, view.request_id, style="danger"),
        button("Details", ids.DETAILS, view.request_id),
    ]
    left = max(0, int(view.expires_at - now) // 60)
    who = safe(view.agent_id, 60)
    text = f"*{who}* wants to run {code(view.action, 300)}\n{safe(view.risk, 20)} risk · {left} min left"
    return [section(text), actions(f"home_approval:{view.request_id}", *buttons)]


def _run_line(run: RunSummary) -> str:
    where = f" · <#{run.channel}>" if _CHANNEL_ID.fullmatch(run.channel) else ""
    icon = _STATE_ICON.get(run.state, "•")
    task = safe(" ".join(run.task.split()), 90)
    return (
        f"{icon} {code(run.run_id, 64)} {task}{where} · {date_token(run.created_at, '{date_short} {time}')}"
    )


def home_view(pending: Sequence[ApprovalView], recent_runs: Sequence[RunSummary], *, now: float) -> Block:
    """`views.publish` payload for the App Home tab: approvals waiting for this user, recent runs."""
    blocks: list[Block] = [header("MassGen")]
    if pending:
        blocks.append(section(f"*Waiting for your approval* ({len(pending)})"))
        for view in pending[:MAX_HOME_APPROVALS]:
            blocks += _home_approval(view, now)
        if len(pending) > MAX_HOME_APPROVALS:
            blocks.append(context(f"and {len(pending) - MAX_HOME_APPROVALS} more: `/massgen approvals`"))
    else:
        blocks.append(section("Nothing is waiting for your approval."))
    blocks.append(divider())
    lines = [_run_line(r) for r in recent_runs[:15]]
    blocks.append(section("*Recent runs*\n" + ("\n".join(lines) if lines else "_No runs yet._")))
    blocks.append(context("Start a run with `/massgen <task>` · `/massgen help` for more"))
    return {"type": "home", "blocks": blocks}


def help_text() -> str:
    """The reply to `/massgen help` (mrkdwn)."""
    return "\n".join(
        [
            "*MassGen* runs a team of AI agents on your task; they answer, read each other's answers, vote, "
            "and the winning answer is posted in the thread.",
            "• `/massgen <task>`: start a run in this channel",
            "• `/massgen --team NAME --agents a,b --policy NAME <task>`: pick team, agents, approval policy",
            "• `/massgen status [run id]`: how a run is doing",
            "• `/massgen cancel <run id>`: stop a run",
            "• `/massgen approvals`: approvals waiting for you",
            "• `/massgen history`: recent runs in this channel",
            "Risky tool calls wait for an approver: *Approve once*, *Approve for this run* or *Deny*. "
            "No answer before the deadline means deny.",
        ]
    )
