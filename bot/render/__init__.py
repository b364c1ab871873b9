"""The shared pure rendering kit: escaping, secret redaction, Markdown → mrkdwn, Block Kit pieces.

Nothing here performs I/O or knows a room: each room's `blocks` module builds its own messages
from this kit (`kit`, `escape`, `mrkdwn`, `redact`, `views`), and `ids` names every action.
"""

from __future__ import annotations

from bot.render.escape import code, code_block, escape, plain, safe, truncate, user_mention
from bot.render.mrkdwn import markdown_to_mrkdwn, split_message
from bot.render.redact import redact
from bot.render.views import help_text, modal

__all__ = [
    "code",
    "code_block",
    "escape",
    "help_text",
    "markdown_to_mrkdwn",
    "modal",
    "plain",
    "redact",
    "safe",
    "split_message",
    "truncate",
    "user_mention",
]
