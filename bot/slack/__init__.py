"""Slack plumbing: the outbox (every Web API call), group lookup, payload parsing, Slack coordinates.

The door loads its modules on first access (PEP 562): the terminal runner opens the coordinates
store (`bot.slack.store`) without paying for the Slack SDK the outbox imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.slack.groups import GroupResolver
    from bot.slack.outbox import MessageRef, Outbox
    from bot.slack.store import BotStore, RunCoordinates

_MODULES = {
    "BotStore": "bot.slack.store",
    "GroupResolver": "bot.slack.groups",
    "MessageRef": "bot.slack.outbox",
    "Outbox": "bot.slack.outbox",
    "RunCoordinates": "bot.slack.store",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'bot.slack' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["BotStore", "GroupResolver", "MessageRef", "Outbox", "RunCoordinates"]
