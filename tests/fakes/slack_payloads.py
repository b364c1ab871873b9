"""What Slack sends an app (`bot.playground.payloads`, shared with the playground); the tests' name for it."""

from __future__ import annotations

from bot.playground.payloads import (
    APP,
    BOT_USER,
    TEAM,
    app_mention,
    block_actions,
    encode_form,
    encode_interactive,
    encode_json,
    message_event,
    signed_request,
    slash_command,
    url_verification,
    view_submission,
)

__all__ = [
    "APP",
    "BOT_USER",
    "TEAM",
    "app_mention",
    "block_actions",
    "encode_form",
    "encode_interactive",
    "encode_json",
    "message_event",
    "signed_request",
    "slash_command",
    "url_verification",
    "view_submission",
]
