"""Slack's request signing lives in `bot.playground.signing`; the tests' name for it."""

from __future__ import annotations

from bot.playground.signing import sign

__all__ = ["sign"]
