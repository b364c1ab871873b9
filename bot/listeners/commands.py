"""`/massgen`: ack first (pure parsing only), then one service call in a supervised task."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from approvals.lifecycle import authorise
from bot.parse import Cancel, History, ListApprovals, StartRun, Status, UsageError, parse_command
from bot.render import code, help_text, safe
from bot.runs import RunRequest
from bot.teams import TeamNotFound

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
        answer = _answer(services, parsed, user, channel, hook if isinstance(hook, str) and hook else None)
        services.runs.spawn(answer, name=f"command:{type(parsed).__name__}")


async def _answer(
    services: Services,
    parsed: StartRun | Status | Cancel | ListApprovals | History,
    user: str,
    channel: str,
    response_url: str | None,
) -> None:
    if isinstance(parsed, StartRun):
        reply = start_run(services, parsed, user=user, channel=channel, response_url=response_url)
    elif isinstance(parsed, Status):
        reply = await status_text(services, parsed.run_id, channel, user)
    elif isinstance(parsed, Cancel):
        reply = await cancel_run(services, parsed.run_id, user)
    elif isinstance(parsed, ListApprovals):
        reply = await approvals_text(services, user)
    else:
        reply = await history_text(services, channel)
    if reply:
        await services.outbox.ephemeral(channel, user, text=reply)


def start_run(
    services: Services,
    parsed: StartRun,
    *,
    user: str,
    channel: str,
    thread_ts: str | None = None,
    context: str | None = None,
    response_url: str | None = None,
) -> str | None:
    """Start a run (or say why not); returns the ephemeral reply, if any."""
    try:
        choice = services.teams.choose(parsed)
    except TeamNotFound as exc:
        return safe(str(exc))
    services.runs.start(
        RunRequest(
            choice=choice,
            task=parsed.task,
            requester=user,
            channel=channel,
            thread_ts=thread_ts,
            context=context,
            response_url=response_url,
        )
    )
    return None


async def status_text(services: Services, run_id: str | None, channel: str, user: str) -> str:
    """Active runs in this channel, or one run by id (shown in its channel or to its requester)."""
    if run_id is None:
        active = services.runs.active_runs(channel)
        if not active:
            return "No runs are active in this channel. Start one with `/massgen <task>`."
        lines = [f"*{len(active)} active run(s):*"]
        lines += [_run_line(a.renderer.view.run_id, a.request.task, a.renderer.view.phase) for a in active]
        return "\n".join(lines)
    stored = await services.store.get_run(run_id)
    # Run ids are not secrets: another channel's run is only shown to the person who started it.
    if stored is None or (stored.channel != channel and stored.requester != user):
        return f"No run with id {code(run_id, 64)}."
    active_run = services.runs.active(run_id)
    state = active_run.renderer.view.phase if active_run is not None else stored.state
    return _run_line(stored.run_id, stored.task, state)


def _run_line(run_id: str, task: str, state: str) -> str:
    return f"• {code(run_id, 64)} {safe(state, 20)}: {safe(' '.join(task.split()), 80)}"


async def cancel_run(services: Services, run_id: str, user: str) -> str:
    """Cancel an active run if `user` may (requester or approver)."""
    active = services.runs.active(run_id)
    if active is None:
        stored = await services.store.get_run(run_id)
        state = "does not exist" if stored is None else f"is not running ({safe(stored.state)})"
        return f"Run {code(run_id, 64)} {state}."
    principal = await services.principal_for_run(user, active.team)
    if not await services.runs.may_control(active, principal):
        return "Only the requester or an approver can cancel this run."
    await active.handle.cancel(by=user)
    return f"Cancelling run {code(run_id, 64)}."


async def approvals_text(services: Services, user: str) -> str:
    """Pending requests this user may decide."""
    mine = []
    for request in await services.approvals.pending():
        principal = await services.approvals_ui.principal(user, request)
        if authorise(request, principal, approve=True) is None:
            mine.append(request)
    if not mine:
        return "Nothing is waiting for you."
    now = time.time()
    lines = [f"*{len(mine)} request(s) wait for you* (buttons are in each run's thread and in App Home):"]
    for request in mine[:20]:
        minutes = max(0, int((request.expires_at.timestamp() - now) // 60))
        action = code(str(request.action), 200)
        lines.append(f"• {action} by {safe(request.agent_id, 64)}, risk {request.risk}, {minutes} min left")
    return "\n".join(lines)


async def history_text(services: Services, channel: str) -> str:
    """The channel's recent runs."""
    runs = await services.store.recent_runs(channel=channel, limit=10)
    if not runs:
        return "No runs in this channel yet."
    return "\n".join(["*Recent runs:*", *(_run_line(r.run_id, r.task, r.state) for r in runs)])
