"""The offline Block Kit checks live in `bot.playground.blockkit`; the tests' name for them."""

from __future__ import annotations

from bot.playground.blockkit import find_mentions, iter_texts, validate_blocks, validate_text, validate_view

__all__ = ["find_mentions", "iter_texts", "validate_blocks", "validate_text", "validate_view"]
