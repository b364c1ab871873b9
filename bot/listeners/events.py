"""Events: a mention starts a run (a follow-up inside a finished run's thread); App Home opens."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp

from bot.listeners.commands import start_run
from bot.listeners.home import publish_home
from bot.parse import Help, StartRun, UsageError, parse_task, strip_mentions
from bot.render import help_text

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
        services.runs.spawn(_mention(services, event), name="event:mention")

    @app.event("app_home_opened")
    async def home(event: dict[str, Any]) -> None:
        user = event.get("user")
        if event.get("tab", "home") == "home" and isinstance(user, str):
            services.home_viewers.add(user)
            services.runs.spawn(publish_home(services, user), name="event:home")


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
        reply = await _start(
            services, parsed, user, channel, thread_ts if isinstance(thread_ts, str) else None
        )
    if reply:
        await services.outbox.ephemeral(channel, user, text=reply, thread_ts=thread_ts)


async def _start(
    services: Services, parsed: StartRun, user: str, channel: str, thread_ts: str | None
) -> str | None:
    """A mention inside a finished run's thread continues from that run's final answer."""
    context = None
    if thread_ts is not None:
        previous = await services.store.run_for_thread(channel, thread_ts)
        if previous is not None and previous.state == "running":
            return "A run is still working in this thread; wait for its answer or cancel it first."
        if previous is not None:
            context = previous.final_answer
        else:
            thread_ts = None  # someone else's thread: start a fresh run in the channel
    return start_run(services, parsed, user=user, channel=channel, thread_ts=thread_ts, context=context)
