"""`/massgen`: ack first (pure parsing only), then one call into a room in a supervised task."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.listeners.replies import answered, response_url, tell
from bot.runs import Where, help_text
from bot.slack.parse import (
    Cancel,
    History,
    ListApprovals,
    OpenSettings,
    StartRun,
    Status,
    UsageError,
    parse_command,
)

if TYPE_CHECKING:
    from bot.wiring import Services

COMMAND = "/massgen"


def register(app: AsyncApp, services: Services) -> None:
    """Attach the slash command listener."""

    @app.command(COMMAND)
    async def massgen(ack: AsyncAck, command: dict[str, Any]) -> None:
        """Ack with help or a usage error (pure parsing), else ack empty and answer in a task."""
        parsed = parse_command(str(command.get("text") or ""))
        user, channel = str(command.get("user_id", "")), str(command.get("channel_id", ""))
        if isinstance(parsed, UsageError):
            await ack(text=parsed.message)
            return
        if not isinstance(parsed, (StartRun, Status, Cancel, ListApprovals, History, OpenSettings)):
            await ack(text=help_text())
            return
        await ack()
        # From the signed payload, like everything else here; replies go through it (works in DMs,
        # private channels and channels the bot is not in, where chat.postEphemeral fails).
        trigger = command.get("trigger_id")
        where = Where(
            user=user,
            channel=channel,
            response_url=response_url(command),
            delivery=f"command:{trigger}" if isinstance(trigger, str) and trigger else None,
        )
        work = answered(
            services,
            _answer(services, parsed, where),
            user=user,
            channel=channel,
            response_url=where.response_url,
        )
        services.tasks.spawn(work, name=f"command:{type(parsed).__name__}")


async def _answer(
    services: Services,
    parsed: StartRun | Status | Cancel | ListApprovals | History | OpenSettings,
    where: Where,
) -> None:
    if isinstance(parsed, OpenSettings):
        # The modal opens with the command's own trigger_id (it lives 3 s and works once).
        trigger = (where.delivery or "").removeprefix("command:")
        reply = await services.channels.open(where.channel, where.user, trigger)
    elif isinstance(parsed, StartRun):
        reply = await services.runs.start(parsed, where)
    else:
        reply = await keyword_reply(services, parsed, where)
    if reply:
        hook = where.response_url
        await tell(services, user=where.user, channel=where.channel, text=reply, response_url=hook)


async def keyword_reply(
    services: Services, parsed: Status | Cancel | ListApprovals | History, where: Where
) -> str | None:
    """The answer to a keyword command (`status`, `cancel RUN`, `approvals`, `history`), slash or mention."""
    if isinstance(parsed, Status):
        return await services.runs.status(parsed.run_id, where.channel, where.user)
    if isinstance(parsed, Cancel):
        return await services.runs.cancel(parsed.run_id, where.user)
    if isinstance(parsed, ListApprovals):
        return await services.approval_ui.pending_text(where.user)
    return await services.runs.history_text(where.channel)
