"""Events: a mention starts a run (a follow-up inside a finished run's thread); App Home opens."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp

from bot.listeners.commands import keyword_reply
from bot.listeners.replies import answered, tell
from bot.listeners.workspaces import REFUSED
from bot.runs import Where, help_text
from bot.slack.parse import Help, OpenSettings, StartRun, UsageError, parse_command, strip_mentions

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
        event_id = body.get("event_id")
        delivery = f"event:{event_id}" if isinstance(event_id, str) and event_id else None
        user, channel, thread = event.get("user"), event.get("channel"), event.get("thread_ts")
        work = answered(
            services,
            _mention(services, event, delivery),
            user=user if isinstance(user, str) else None,
            channel=channel if isinstance(channel, str) else None,
            thread_ts=thread if isinstance(thread, str) else None,
        )
        services.tasks.spawn(work, name="event:mention")

    @app.event("app_home_opened")
    async def home(body: dict[str, Any], event: dict[str, Any]) -> None:
        user = event.get("user")
        if event.get("tab", "home") != "home" or not isinstance(user, str):
            return
        services.tasks.spawn(services.home.opened(user), name="event:home")


async def _mention(services: Services, event: dict[str, Any], delivery: str | None = None) -> None:
    user, channel = event.get("user"), event.get("channel")
    if not isinstance(user, str) or not isinstance(channel, str):
        return
    thread = event.get("thread_ts")
    thread_ts = thread if isinstance(thread, str) else None
    # Only the bot's own mention goes: "@massgen ask @alice about the outage" keeps Alice.
    # `@massgen status` answers like `/massgen status`; anything else is a task (`repo=NAME` first).
    text = strip_mentions(str(event.get("text") or ""), services.identity.get("user_id"))
    parsed = parse_command(text, mention=True)
    reply: str | None
    where = Where(user=user, channel=channel, thread_ts=thread_ts, delivery=delivery)
    if isinstance(parsed, UsageError):
        reply = parsed.message
    elif isinstance(parsed, Help):
        reply = help_text()
    elif isinstance(parsed, StartRun):
        reply = await services.runs.mention(parsed, where)
    elif isinstance(parsed, OpenSettings):  # a modal needs a slash command's trigger_id
        reply = "Channel settings open with `/massgen settings`."
    else:
        reply = await keyword_reply(services, parsed, where)
    if reply:
        await tell(services, user=user, channel=channel, text=reply, thread_ts=thread_ts)


def refuse(services: Services, body: dict[str, Any]) -> Coroutine[Any, Any, None] | None:
    """The answer to an event of a user of another workspace (the middleware acked it), if any:
    a mention hears why nothing starts (a partner's bot hears nothing); Home shows only the refusal."""
    event = body.get("event")
    if not isinstance(event, dict):
        return None
    user, kind = event.get("user"), event.get("type")
    if kind == "app_mention" and not event.get("bot_id"):
        return _refuse_mention(services, event)
    if kind == "app_home_opened" and event.get("tab", "home") == "home" and isinstance(user, str):
        return services.home.refuse(user, REFUSED)
    return None


async def _refuse_mention(services: Services, event: dict[str, Any]) -> None:
    """Say why nothing starts, to them only (in the thread they wrote in)."""
    user, channel, thread = event.get("user"), event.get("channel"), event.get("thread_ts")
    if isinstance(user, str) and isinstance(channel, str):
        thread_ts = thread if isinstance(thread, str) else None
        await tell(services, user=user, channel=channel, text=REFUSED, thread_ts=thread_ts)
