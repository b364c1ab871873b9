"""Bolt listeners, one module per surface; each exposes `register(app, services)`.

`commands` (/massgen), `actions` (buttons), `views` (modal submissions), `events` (mentions,
App Home). In front of them all, `outsiders` is the middleware that refuses users of other
workspaces (Slack Connect), so no listener checks that itself. A listener acks first (pure
parsing only, never a Web API call or a database write before `ack()`), parses with
`bot.slack.parse`, then hands one call into a room (`services.runs`, `services.approval_ui`,
`services.home`) to `services.tasks.spawn(...)` so the task is owned and drained on shutdown,
and replies with what the room returned.
"""

from bot.listeners import actions, commands, events, outsiders, views

__all__ = ["actions", "commands", "events", "outsiders", "views"]
