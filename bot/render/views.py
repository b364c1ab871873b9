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
