"""Pure rendering: escaping, secret redaction, Markdown → mrkdwn, and Block Kit builders.

Nothing here performs I/O; builders take view-models and return `(text, blocks)` or view payloads.
"""

from __future__ import annotations

from bot.render.escape import code, code_block, escape, plain, safe, truncate, user_mention
from bot.render.mrkdwn import markdown_to_mrkdwn, split_message
from bot.render.redact import redact
from bot.render.views import help_text

__all__ = [
    "code",
    "code_block",
    "escape",
    "help_text",
    "markdown_to_mrkdwn",
    "plain",
    "redact",
    "safe",
    "split_message",
    "truncate",
    "user_mention",
]
