"""Small Block Kit constructors and number formats shared by the renderers.

Only section, context, header, divider and actions blocks: they render the same on desktop
and mobile. Callers pass text that is already escaped mrkdwn; `plain_text` goes through `plain`.
"""

from __future__ import annotations

import time
from typing import Any

from bot.render.escape import plain, truncate

Block = dict[str, Any]
SECTION_LIMIT = 3000
CONTEXT_LIMIT = 2000  # per element; keeps a context block well under Slack's limits


def section(text: str = "", *, block_id: str | None = None, fields: list[str] | None = None) -> Block:
    """A mrkdwn section; with `fields` the text may be left out (Slack needs text or fields)."""
    block: Block = {"type": "section"}
    if text.strip() or not fields:
        block["text"] = {"type": "mrkdwn", "text": truncate(text or "​", SECTION_LIMIT)}
    if fields:
        block["fields"] = [{"type": "mrkdwn", "text": truncate(f or "​", 2000)} for f in fields[:10]]
    if block_id:
        block["block_id"] = block_id
    return block


def context(*texts: str) -> Block:
    elements = [{"type": "mrkdwn", "text": truncate(t, CONTEXT_LIMIT)} for t in texts if t][:10]
    return {"type": "context", "elements": elements or [{"type": "mrkdwn", "text": " "}]}


def header(text: str) -> Block:
    return {"type": "header", "text": {"type": "plain_text", "text": plain(text, 150), "emoji": True}}


def divider() -> Block:
    return {"type": "divider"}


def confirm(title: str, text: str, yes: str, no: str = "Cancel", *, danger: bool = False) -> Block:
    dialog: Block = {
        "title": {"type": "plain_text", "text": plain(title, 100)},
        # plain_text: a confirm dialog renders no mrkdwn, and its text is never a place for mentions.
        "text": {"type": "plain_text", "text": plain(text, 300)},
        "confirm": {"type": "plain_text", "text": plain(yes, 30)},
        "deny": {"type": "plain_text", "text": plain(no, 30)},
    }
    if danger:
        dialog["style"] = "danger"
    return dialog


def button(
    text: str, action_id: str, value: str, *, style: str | None = None, confirm_dialog: Block | None = None
) -> Block:
    element: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": plain(text, 75), "emoji": True},
        "action_id": action_id,
        "value": value[:2000],
    }
    if style:
        element["style"] = style
    if confirm_dialog:
        element["confirm"] = confirm_dialog
    return element


def actions(block_id: str, *elements: Block) -> Block:
    return {"type": "actions", "block_id": block_id[:255], "elements": list(elements)[:25]}


def date_token(at: float, fmt: str = "{time}") -> str:
    """Slack renders `<!date^…>` in each reader's time zone; the fallback is UTC."""
    fallback = time.strftime("%H:%M UTC", time.gmtime(at))
    return f"<!date^{int(at)}^{fmt}|{fallback}>"


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def tokens(n: int) -> str:
    return f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def cost(usd: float) -> str:
    return f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"
