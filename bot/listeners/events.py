"""Events: a mention starts a run (a follow-up inside a finished run's thread); App Home opens."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp

from bot.render import help_text
from bot.runs import Where
from bot.slack.parse import Help, UsageError, parse_task, strip_mentions

if TYPE_CHECKING:
    from bot.wiring import Services


class SeenEvents:
    """Slack redelivers events (HTTP retries, Socket Mode reconnects): handle each `event_id` once."""

    def __init__(self, size: int = 2048) -> None:
        self._size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def first_time(self, event_id: str | None) -> bool:
        """True the first time an id is seen (events without one always pass)."""
        if not event_id:
            return True
        if event_id in self._ids:
            return False
        self._ids[event_id] = None
        if len(self._ids) > self._size:
            self._ids.popitem(last=False)
        return True


def register(app: AsyncApp, services: Services) -> None:
    """Attach the event listeners (Bolt acks events before they run)."""
    seen = SeenEvents()

    @app.event("app_mention")
    async def mention(body: dict[str, Any], event: dict[str, Any]) -> None:
        if not seen.first_time(body.get("event_id")) or event.get("bot_id"):
            return
        services.tasks.spawn(_mention(services, event), name="event:mention")

    @app.event("app_home_opened")
    async def home(event: dict[str, Any]) -> None:
        user = event.get("user")
        if event.get("tab", "home") == "home" and isinstance(user, str):
            services.tasks.spawn(services.home.opened(user), name="event:home")


async def _mention(services: Services, event: dict[str, Any]) -> None:
    user, channel = event.get("user"), event.get("channel")
    if not isinstance(user, str) or not isinstance(channel, str):
        return
    thread_ts = event.get("thread_ts")
    parsed = parse_task(strip_mentions(str(event.get("text") or "")))
    reply: str | None
    if isinstance(parsed, UsageError):
        reply = parsed.message
    elif isinstance(parsed, Help):
        reply = help_text()
    else:
        where = Where(user=user, channel=channel, thread_ts=thread_ts if isinstance(thread_ts, str) else None)
        reply = await services.runs.mention(parsed, where)
    if reply:
        await services.outbox.ephemeral(channel, user, text=reply, thread_ts=thread_ts)
