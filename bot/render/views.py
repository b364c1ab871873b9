"""Shared view helpers: the modal frame every surface uses, and the `/massgen help` text."""

from __future__ import annotations

from bot.render.kit import Block


def modal(callback_id: str, title: str, blocks: list[Block], **extra: object) -> Block:
    """A `views.open` modal frame (title clipped to Slack's 24 characters, at most 100 blocks)."""
    view: Block = {
        "type": "modal",
        "callback_id": callback_id,
        "title": {"type": "plain_text", "text": title[:24]},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": blocks[:100],
    }
    view.update(extra)
    return view


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
