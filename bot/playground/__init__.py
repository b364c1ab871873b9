"""The playground: a local Slack-compatible workspace in the browser, for the real bot (`make run`).

`SlackEmulator` is Slack's Web API (strict: scopes, rate limits, Block Kit, trigger expiry); the
`Workspace` is Slack's client side (people, a channel, signed requests to the bot); `Page` serves the
front end (`static/`, plain HTML/CSS/JS) and its `Guide` (suggested tasks, the model, the time per run);
`serve_playground` wires the real bot to them.
"""

from __future__ import annotations

from bot.playground.emulator import SlackEmulator
from bot.playground.guide import SUGGESTIONS, Guide, Suggestion
from bot.playground.page import Page
from bot.playground.run import Playground, TeamPick, playground_team, serve_playground
from bot.playground.workspace import APPROVER, BYSTANDER, CHANNEL, PEOPLE, REQUESTER, Person, Workspace

__all__ = [
    "APPROVER",
    "BYSTANDER",
    "CHANNEL",
    "PEOPLE",
    "REQUESTER",
    "SUGGESTIONS",
    "Guide",
    "Page",
    "Person",
    "Playground",
    "SlackEmulator",
    "Suggestion",
    "TeamPick",
    "Workspace",
    "playground_team",
    "serve_playground",
]
