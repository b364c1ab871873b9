"""A run in Slack, asked for: start (or follow up), status, cancel, finish now, history, a full answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.render.escape import code, safe
from bot.render.kit import Block
from bot.runs.blocks import render_answer_modal
from bot.runs.control import GroupsOf, may_control
from bot.runs.history import RunHistory
from bot.runs.request import RunRequest
from bot.runs.supervisor import ActiveRun, RunSupervisor
from bot.runs.teams import TeamCatalog, TeamChoice, TeamNotFound
from bot.slack.parse import StartRun
from orchestrator import AnswerSubmitted, Parked

if TYPE_CHECKING:
    from bot.channel_settings import ChannelSettings
    from bot.engine import Action

STILL_RUNNING = "A run is still working in this thread; wait for its answer or cancel it first."
NOT_ALLOWED = "Only the requester or an approver can stop this run."


def run_line(run_id: str, task: str, state: str) -> str:
    """One run in a slash-command reply."""
    return f"• {code(run_id, 64)} {safe(state, 20)}: {safe(' '.join(task.split()), 80)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Where:
    """Where a request to start a run came from."""

    user: str
    channel: str
    thread_ts: str | None = None
    response_url: str | None = None
    delivery: str | None = None  # Slack's id for this request (trigger or event id): a redelivery dedups


class RunUseCases:
    """What the listeners ask of runs; every reply is the text to show the user (None: nothing)."""

    def __init__(
        self,
        *,
        supervisor: RunSupervisor,
        teams: TeamCatalog,
        history: RunHistory,
        groups_of: GroupsOf,
        channels: ChannelSettings | None = None,
    ) -> None:
        self.channels = channels  # a channel's defaults and approvers (None: the team file's only)
        self.supervisor = supervisor
        self.teams = teams
        self.history = history
        self._groups_of = groups_of

    async def start(self, parsed: StartRun, where: Where, *, context: str | None = None) -> str | None:
        """Start a run with the channel's defaults filled in (or say why not, in one line)."""
        selection = None
        if self.channels is not None:
            selected = await self.channels.select(parsed, where.channel)
            if isinstance(selected, str):
                return selected
            parsed, selection = selected
        try:
            choice = self.teams.startable(parsed)
        except TeamNotFound as exc:
            return safe(str(exc))
        if selection is not None:  # the channel's approvers join the team file's
            choice = TeamChoice(name=choice.name, team=selection.apply(choice.team))
        self.supervisor.start(
            RunRequest(
                choice=choice,
                task=parsed.task,
                requester=where.user,
                channel=where.channel,
                thread_ts=where.thread_ts,
                context=context,
                response_url=where.response_url,
                parsed=parsed,
                delivery=where.delivery,
                selection=selection,
            )
        )
        return None

    async def mention(self, parsed: StartRun, where: Where) -> str | None:
        """A mention inside a finished run's thread continues from that run's final answer."""
        context = None
        if where.thread_ts is not None:
            previous = await self.history.in_thread(where.channel, where.thread_ts)
            if previous is not None and previous.state == "running":
                return STILL_RUNNING
            if previous is not None:
                context = previous.final_answer
            else:  # someone else's thread: start a fresh run in the channel
                where = Where(user=where.user, channel=where.channel, delivery=where.delivery)
        return await self.start(parsed, where, context=context)

    async def status(self, run_id: str | None, channel: str, user: str) -> str:
        """Active runs in this channel, or one run by id (shown in its channel or to its requester)."""
        if run_id is None:
            active = self.supervisor.active_runs(channel)
            if not active:
                return "No runs are active in this channel. Start one with `/massgen <task>`."
            lines = [f"*{len(active)} active run(s):*"]
            lines += [run_line(a.renderer.view.run_id, a.request.task, a.renderer.view.phase) for a in active]
            return "\n".join(lines)
        stored = await self.history.get(run_id)
        # Run ids are not secrets: another channel's run is only shown to the person who started it.
        if stored is None or (stored.channel != channel and stored.requester != user):
            return f"No run with id {code(run_id, 64)}."
        active_run = self.supervisor.active(run_id)
        state = active_run.renderer.view.phase if active_run is not None else stored.state
        return run_line(stored.run_id, stored.task, state)

    async def history_text(self, channel: str) -> str:
        """The channel's recent runs."""
        runs = await self.history.recent(channel=channel, limit=10)
        if not runs:
            return "No runs in this channel yet."
        return "\n".join(["*Recent runs:*", *(run_line(r.run_id, r.task, r.state) for r in runs)])

    async def _controllable(self, run_id: str, user: str) -> ActiveRun | None:
        """The active run when `user` may cancel or finish it."""
        active = self.supervisor.active(run_id)
        if active is None:
            return None
        allowed = await may_control(
            user, requester=active.request.requester, team=active.team, groups_of=self._groups_of
        )
        return active if allowed else None

    async def _elsewhere(self, run_id: str, user: str, action: Action) -> str | None:
        """A run held by another process (a worker, or parked): ask the engine to stop it there.

        "asked", NOT_ALLOWED, or None when no engine holds a running run by that id. Who may stop
        it is judged with the run's team as this process's catalog has it.
        """
        engine = self.supervisor.engine
        stored = await self.history.get(run_id)
        if stored is None or stored.state != "running" or not await engine.holds(run_id):
            return None
        named = None if stored.team in (None, self.teams.default.name) else stored.team
        try:
            team = self.teams.choose(StartRun(task="", team=named)).team
        except TeamNotFound:  # the team file is gone here: only the requester and default approvers
            team = self.teams.default.team
        requester = stored.requester or ""
        if not await may_control(user, requester=requester, team=team, groups_of=self._groups_of):
            return NOT_ALLOWED
        await engine.control(run_id, action, user)
        return "asked"

    async def cancel(self, run_id: str, user: str) -> str:
        """`/massgen cancel <id>`: cancel an active run if `user` may (requester or approver)."""
        if self.supervisor.active(run_id) is None:
            asked = await self._elsewhere(run_id, user, "cancel")
            if asked == "asked":
                return f"Cancelling run {code(run_id, 64)}."
            if asked is not None:
                return asked
            stored = await self.history.get(run_id)
            state = "does not exist" if stored is None else f"is not running ({safe(stored.state)})"
            return f"Run {code(run_id, 64)} {state}."
        active = await self._controllable(run_id, user)
        if active is None:
            return "Only the requester or an approver can cancel this run."
        await self._stop_here(active, run_id, user, finish=False)
        return f"Cancelling run {code(run_id, 64)}."

    async def stop(self, run_id: str, user: str, *, finish: bool) -> str | None:
        """The status message's Cancel / Finish now buttons."""
        if self.supervisor.active(run_id) is None:
            asked = await self._elsewhere(run_id, user, "finish" if finish else "cancel")
            if asked is None:
                return "This run is not running any more."
            return None if asked == "asked" else asked
        active = await self._controllable(run_id, user)
        if active is None:
            return NOT_ALLOWED
        await self._stop_here(active, run_id, user, finish=finish)
        return None

    async def _stop_here(self, active: ActiveRun, run_id: str, user: str, *, finish: bool) -> None:
        """Stop a run this process holds; one that parked just before is stopped where it waits."""
        if finish:
            await active.handle.finish_now(by=user)
        else:
            await active.handle.cancel(by=user)
        if isinstance(await active.handle.outcome(), Parked):  # the stop came as it parked
            await self._elsewhere(run_id, user, "finish" if finish else "cancel")

    async def answer(self, value: str, channel: str | None) -> Block | None:
        """The full-answer modal for a "Show full" button (`run_id:label`), only in the run's channel."""
        run_id, _, label = value.partition(":")
        run = await self.history.get(run_id)
        # Button values can be forged: an answer is shown only in the channel its run posted to.
        if run is None or channel is None or run.channel != channel:
            return None
        for event in await self.history.run_store.events(run_id):
            if isinstance(event, AnswerSubmitted) and event.label == label:
                return await render_answer_modal(label, event.content)
        return None
