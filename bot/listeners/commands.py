"""`/massgen`: ack first (pure parsing only), then one call into a room in a supervised task."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.render import help_text
from bot.runs import Where
from bot.slack.parse import Cancel, History, ListApprovals, StartRun, Status, UsageError, parse_command

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
        if not isinstance(parsed, (StartRun, Status, Cancel, ListApprovals, History)):
            await ack(text=help_text())
            return
        await ack()
        hook = command.get("response_url")  # from the signed payload, like everything else here
        where = Where(
            user=user, channel=channel, response_url=hook if isinstance(hook, str) and hook else None
        )
        services.tasks.spawn(_answer(services, parsed, where), name=f"command:{type(parsed).__name__}")


async def _answer(
    services: Services, parsed: StartRun | Status | Cancel | ListApprovals | History, where: Where
) -> None:
    if isinstance(parsed, StartRun):
        reply = services.runs.start(parsed, where)
    elif isinstance(parsed, Status):
        reply = await services.runs.status(parsed.run_id, where.channel, where.user)
    elif isinstance(parsed, Cancel):
        reply = await services.runs.cancel(parsed.run_id, where.user)
    elif isinstance(parsed, ListApprovals):
        reply = await services.approval_ui.pending_text(where.user)
    else:
        reply = await services.runs.history_text(where.channel)
    if reply:
        await services.outbox.ephemeral(where.channel, where.user, text=reply)
