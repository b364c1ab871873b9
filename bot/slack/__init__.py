"""Slack plumbing: the outbox (every Web API call), group lookup, payload parsing, Slack coordinates.

The door loads its modules on first access (PEP 562): the terminal runner opens the coordinates
store (`bot.slack.store`) without paying for the Slack SDK the outbox imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from approvals import lazy_exports

if TYPE_CHECKING:
    from bot.slack.groups import GroupResolver
    from bot.slack.outbox import GiveUp, MessageRef, Outbox
    from bot.slack.store import BotStore, OutboxStore, RunCoordinates, bot_metadata

_MODULES = {
    "BotStore": "bot.slack.store",
    "GiveUp": "bot.slack.outbox",
    "GroupResolver": "bot.slack.groups",
    "MessageRef": "bot.slack.outbox",
    "Outbox": "bot.slack.outbox",
    "OutboxStore": "bot.slack.store",
    "RunCoordinates": "bot.slack.store",
    "bot_metadata": "bot.slack.store",
}


__getattr__ = lazy_exports(__name__, _MODULES)


__all__ = [
    "BotStore",
    "GiveUp",
    "GroupResolver",
    "MessageRef",
    "Outbox",
    "OutboxStore",
    "RunCoordinates",
    "bot_metadata",
]
