"""Bolt listeners, one module per surface; each exposes `register(app, services)`.

`commands` (/massgen), `actions` (buttons), `views` (modal submissions), `events` (mentions,
App Home), `home` (the Home tab's content). A listener acks first (pure parsing only, never a
Web API call or a database write before `ack()`), then hands one service call to
`services.runs.spawn(...)` so the task is owned and drained on shutdown. To add one: pick the
module for its surface, register it in `register`, and add an action id in `bot/render/ids.py`.
"""
