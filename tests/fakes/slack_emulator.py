"""The Slack Web API emulator now lives in the product (`bot.playground.emulator`); the tests' name for it."""

from __future__ import annotations

from bot.playground.emulator import (
    ALL_SCOPES,
    Call,
    Fault,
    Limits,
    ResponseHook,
    SlackEmulator,
    manifest_scopes,
    validate_blocks,
    validate_view,
)

__all__ = [
    "ALL_SCOPES",
    "Call",
    "Fault",
    "Limits",
    "ResponseHook",
    "SlackEmulator",
    "manifest_scopes",
    "validate_blocks",
    "validate_view",
]
