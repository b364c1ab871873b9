"""The emulator's Web API handlers live in `bot.playground.methods`; the tests' name for them."""

from __future__ import annotations

from bot.playground.methods import METHOD_SCOPES, channel_kind, manifest_scopes, needed_scopes

__all__ = ["METHOD_SCOPES", "channel_kind", "manifest_scopes", "needed_scopes"]
