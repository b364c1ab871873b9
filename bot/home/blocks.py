"""The App Home tab: the approvals waiting for this user (with their buttons) and recent runs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from bot.approval_ui.blocks import ApprovalView, home_approval_blocks
from bot.render.escape import code, safe
from bot.render.kit import Block, context, date_token, divider, header, section

MAX_HOME_APPROVALS = 10  # 3 blocks each; keeps the Home tab well under 100 blocks
_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,}")
_STATE_ICON = {"running": "⏳", "finished": "✅", "failed": "❌", "cancelled": "🚫"}


class RunSummary(Protocol):
    """What the Home tab shows of a past run (`bot.runs.SlackRun` has these fields)."""

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
            blocks += home_approval_blocks(view, now)
        if len(pending) > MAX_HOME_APPROVALS:
            blocks.append(context(f"and {len(pending) - MAX_HOME_APPROVALS} more: `/massgen approvals`"))
    else:
        blocks.append(section("Nothing is waiting for your approval."))
    blocks.append(divider())
    lines = [_run_line(r) for r in recent_runs[:15]]
    blocks.append(section("*Recent runs*\n" + ("\n".join(lines) if lines else "_No runs yet._")))
    blocks.append(context("Start a run with `/massgen <task>` · `/massgen help` for more"))
    return {"type": "home", "blocks": blocks}
