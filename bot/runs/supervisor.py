"""The run supervisor: starts runs for Slack, renders their events through the outbox, stops them on shutdown.

With an engine (the bot's default), `start` only submits the run: the engine runs it as a durable
workflow whose step calls `execute` here, in whichever worker dequeues it; after a crash the step
runs again and `execute` resumes the run from the run store, rebuilding its renderer from the
stored view and the Slack coordinates. Its tasks (its status ticker, its watchers) belong to the
bot's one `TaskSupervisor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slack_sdk.webhook.async_client import AsyncWebhookClient
from sqlalchemy.exc import SQLAlchemyError

from approvals import ApprovalService, ConversationRef
from bot.approval_ui.port import ThreadApprovalPort
from bot.batched import Batched
from bot.channel_settings import Selection
from bot.engine.config import FENCED, PARKED, SUSPENDED
from bot.errors import OutboxError
from bot.ops import bind_request, bind_run, bound_request
from bot.runs.blocks import status_blocks
from bot.runs.presenter import RunRenderer
from bot.runs.repositories import RunRepositories
from bot.runs.teams import TeamCatalog, TeamChoice
from bot.slack.outbox import GiveUp, MessageRef, Outbox
from bot.slack.parse import StartRun
from bot.slack.store import BotStore
from bot.tasks import TaskSupervisor
from orchestrator import (
    TERMINAL_KINDS,
    ModelFactory,
    OrchestratorError,
    Parked,
    RunContext,
    RunEvent,
    RunFinished,
    RunHandle,
    RunOutcome,
    RunStore,
    RunStoreError,
    RunTools,
    RunView,
    Suspended,
    TeamConfig,
    resume_run,
    start_run,
    stop_parked_run,
)

if TYPE_CHECKING:
    from bot.engine import Control, Engine
    from bot.slack.store import OutboxRow, RunCoordinates

log = logging.getLogger(__name__)

# What Slack answers when the bot may not post where it was asked (the rest: Slack failed).
_NOT_A_MEMBER = frozenset(
    {"not_in_channel", "channel_not_found", "is_archived", "restricted_action", "cannot_dm_bot",
     "ekm_access_denied", "team_access_not_granted", "messages_tab_disabled"}
)  # fmt: skip
SUBMIT_WAIT = 30.0  # seconds a submitting task waits for its run to begin in this process
RECENT_SUBMITS = 1024  # run ids remembered to recognise a redelivery


def run_id_for(delivery: str | None) -> str:
    """A run's id: derived from Slack's delivery id (the same request delivered twice, to any front
    end, is one workflow and so one run), else random."""
    if delivery is None:
        return f"run-{secrets.token_hex(6)}"
    return f"run-{hashlib.sha256(delivery.encode()).hexdigest()[:12]}"


# (run context, approval port) -> run tools; None runs agents with the workflow tools only.
ToolsBuilder = Callable[[RunContext, ThreadApprovalPort], Awaitable[RunTools]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """A run to start from Slack."""

    choice: TeamChoice
    task: str
    requester: str
    channel: str
    thread_ts: str | None = None  # a follow-up posts into its parent's thread
    context: str | None = None  # the previous final answer, for a follow-up
    response_url: str | None = None  # a slash command's webhook: works where the bot cannot post
    parsed: StartRun | None = None  # what was asked for: a worker resolves the team from it again
    delivery: str | None = None  # Slack's id for the request: the run id derives from it
    request_id: str | None = None  # the id the request's log records carry (its run's carry it too)
    selection: Selection | None = None  # repository, defaults used, channel approvers (settings room)

    def payload(self) -> dict[str, Any]:
        """Plain data for the engine (pickled into its database: no secrets, so no team config)."""
        parsed = self.parsed
        return {
            "team": None if parsed is None else parsed.team,
            "agents": [] if parsed is None else list(parsed.agents),
            "policy": None if parsed is None else parsed.policy,
            "task": self.task,
            "requester": self.requester,
            "channel": self.channel,
            "thread_ts": self.thread_ts,
            "context": self.context,
            "response_url": self.response_url,
            "request_id": self.request_id or bound_request(),
            "selection": None if self.selection is None else self.selection.payload(),
        }

    def used(self) -> str:
        """What the status message says the run used ("repo `billing` (channel default) · …"), or ""."""
        if self.selection is None:
            return ""
        team = None if self.parsed is None else self.parsed.team
        return self.selection.line(team=team, policy=self.choice.team.permissions.policy)

    @classmethod
    def of(cls, payload: dict[str, Any], teams: TeamCatalog) -> RunRequest:
        """The request back from its payload, its team resolved from this process's catalog."""
        parsed = StartRun(
            task=str(payload["task"]),
            team=payload.get("team"),
            agents=tuple(payload.get("agents") or ()),
            policy=payload.get("policy"),
        )
        selection = Selection.of(payload.get("selection"))
        choice = teams.choose(parsed)
        if selection is not None:  # the channel's approvers, as when the run was asked for
            choice = TeamChoice(name=choice.name, team=selection.apply(choice.team))
        return cls(
            choice=choice,
            task=parsed.task,
            requester=str(payload["requester"]),
            channel=str(payload["channel"]),
            thread_ts=payload.get("thread_ts"),
            context=payload.get("context"),
            response_url=payload.get("response_url"),
            parsed=parsed,
            request_id=payload.get("request_id"),
            selection=selection,
        )


@dataclass(slots=True, kw_only=True)
class ActiveRun:
    """A run this process is driving."""

    request: RunRequest
    handle: RunHandle
    renderer: RunRenderer
    done: asyncio.Event = field(default_factory=asyncio.Event)
    parked: bool = False  # it ended its segment waiting for a human (its workflow waits for a wake)

    @property
    def team(self) -> TeamConfig:
        return self.request.choice.team


@dataclass(frozen=True, slots=True)
class _Saved:
    """What Slack-side state a run has, read in one go: where it lives, its status and progress posts."""

    where: RunCoordinates | None
    status: OutboxRow | None
    progress: OutboxRow | None


class RunSupervisor:
    """Starts and drives the runs of this process; their tasks belong to `tasks`."""

    def __init__(
        self,
        *,
        tasks: TaskSupervisor,
        outbox: Outbox,
        store: BotStore,
        approvals: ApprovalService,
        run_store: RunStore | None = None,
        tools: ToolsBuilder | None = None,
        clock: Callable[[], float] = time.time,
        broadcast_final: bool = False,
        observe: Callable[[str, RunEvent], None] | None = None,
        status_refresh: float = 30.0,
        progress_after: float = 20.0,
        models: ModelFactory | None = None,
        teams: TeamCatalog | None = None,
        repositories: RunRepositories | None = None,
    ) -> None:
        self._outbox = outbox
        self._teams = teams
        self._repositories = repositories  # None: runs never name a repository (tests, benches)
        self.engine: Engine | None = None  # set by the composition root; None runs runs inline
        self._store = store
        self._approvals = approvals
        self._run_store = run_store
        self._tools = tools
        self._clock = clock
        self._broadcast = broadcast_final
        self._models = models  # None: each run builds its own clients (the runner's default)
        self._observe = observe  # metrics hook (the bench measures event-to-Slack freshness with it)
        self._tasks = tasks
        self._active: dict[str, ActiveRun] = {}
        self._closing = False
        # A run waiting on a human emits nothing; its elapsed time still moves. chat.update is a
        # shared Tier 3 budget, so quiet runs are refreshed rarely and the outbox paces them.
        self._status_refresh = status_refresh
        self._progress_after = progress_after
        self._ticker: asyncio.Task[Any] | None = None
        self._controls: asyncio.Task[Any] | None = None
        # Looked up for many resumes at once after a restart (one query each, not one per run).
        self._coordinates = Batched(store.coordinates)
        self._controls_of = Batched(self._take_controls)
        self._begun: dict[str, asyncio.Event] = {}  # runs submitted here, until they begin here
        self._submitted: dict[str, None] = {}  # the latest run ids submitted here, oldest first
        self._no_runs = asyncio.Event()  # wakes the ticker when the last run ends
        self._told: dict[str, None] = {}  # runs whose requester heard that Slack lost a post
        outbox.on_give_up.append(self._on_give_up)
        self.started = 0

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """A task owned by the bot's task supervisor."""
        return self._tasks.spawn(coro, name=name)

    def start(self, request: RunRequest) -> str:
        """Start a run in the background (through the engine when there is one); returns its id at once."""
        if self._closing:
            raise RuntimeError("the bot is shutting down")
        run_id = run_id_for(request.delivery)
        if self.engine is None:
            self.spawn(self._execute(run_id, request), name=f"run:{run_id}")
        else:
            self.spawn(self._submit(self.engine, run_id, request), name=f"submit:{run_id}")
        return run_id

    async def _submit(self, engine: Engine, run_id: str, request: RunRequest) -> None:
        if run_id in self._submitted:  # delivered twice: the engine dedups it, nothing to wait for
            await engine.submit(run_id, request.payload())
            return
        self._submitted[run_id] = None
        if len(self._submitted) > RECENT_SUBMITS:
            self._submitted.pop(next(iter(self._submitted)))
        begun = self._begun[run_id] = asyncio.Event()
        try:
            await engine.submit(run_id, request.payload())
            if engine.config.executes:
                # Until a worker here picks it up (another process may): `wait_idle` then covers
                # the time a run spends queued, and tests and benches can settle.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(begun.wait(), SUBMIT_WAIT)
        finally:
            self._begun.pop(run_id, None)

    def wake(self, run_id: str, message: Any) -> None:
        """Wake a parked run through the engine (an approval of it ended, here or anywhere).

        A run parked in this process resumes here: the waking task lasts until it begins (as a
        submission does), so `wait_idle` covers the hand-over.
        """
        if self.engine is not None:
            self.spawn(self._wake(self.engine, run_id, message), name=f"wake:{run_id}")

    async def _wake(self, engine: Engine, run_id: str, message: Any) -> None:
        begun = self._begun.setdefault(run_id, asyncio.Event()) if engine.config.executes else None
        try:
            if not await engine.wake(run_id, message) or begun is None:
                return  # not an engine run (nothing resumes), or it resumes in another process
            active = self._active.get(run_id)
            if active is not None:  # still parking (or live: then the wake is stale, nothing resumes)
                await active.done.wait()
                if not active.parked:
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(begun.wait(), SUBMIT_WAIT)
        finally:
            if begun is not None and self._begun.get(run_id) is begun:
                self._begun.pop(run_id, None)

    async def execute(self, run_id: str, payload: dict[str, Any]) -> str:
        """The engine's step: start the run, or resume it after a crash; how it ended.

        The run is a task of the bot's task supervisor (so shutdown and `wait_idle` see it).
        """
        if self._teams is None:
            raise RuntimeError("a supervisor that executes engine runs needs the team catalog")
        request = RunRequest.of(payload, self._teams)
        task = self.spawn(self._execute(run_id, request), name=f"run:{run_id}")
        if (begun := self._begun.get(run_id)) is not None:
            begun.set()
        outcome: str = await asyncio.shield(task)
        if outcome != PARKED and (waiting := self._begun.get(run_id)) is not None:
            waiting.set()  # it ended: a wake sent meanwhile resumes nothing, stop waiting for it
        return outcome

    async def _execute(self, run_id: str, request: RunRequest) -> str:
        try:
            return await self._execute_stored(run_id, request)
        except (
            RunStoreError,
            SQLAlchemyError,
            OSError,
        ) as exc:  # the store is away: the engine runs the step again later
            log.warning("run %s: its store is unavailable (%s); it runs again later", run_id, exc)
            return SUSPENDED

    async def _execute_stored(self, run_id: str, request: RunRequest) -> str:
        bind_run(run_id)  # this task and the run's tasks log with its id, and the request's
        if request.request_id is not None:
            bind_request(request.request_id)
        events = [] if self._run_store is None else await self._run_store.events(run_id)
        if events and events[-1].kind in TERMINAL_KINDS:
            # It ended, and the process died before the engine heard: maybe before its end was shown.
            await self._settle(run_id, request, events)
            return events[-1].kind
        if events:
            # Read together, not one after another: after a restart every resume waits on one busy
            # event loop, and each round trip in a row adds that wait again.
            controls, saved = await asyncio.gather(self._clicked(run_id), self._saved(run_id))
            if controls:
                return await self._stop(run_id, request, events, controls[0], saved)
            active = await self._resume(run_id, request, events, saved)
        else:
            active = await self._run(run_id, request)
        if active is None:
            return "failed"
        outcome = await self._drive(active)
        if isinstance(outcome, Suspended):
            return FENCED if outcome.fenced else SUSPENDED
        return PARKED if isinstance(outcome, Parked) else outcome.kind

    async def _settle(self, run_id: str, request: RunRequest, events: list[RunEvent]) -> None:
        """A run whose end is stored: its final status, and its final answer unless one was saved."""
        saved = await self._saved(run_id)
        views = list(itertools.accumulate(events, RunView.apply, initial=RunView()))
        renderer = await self._renderer_for(run_id, request, views[-1], saved)
        self._restore_progress(renderer, events, views[1:], saved)
        final = events[-1]
        if isinstance(final, RunFinished) and not await self._outbox.final_saved(run_id):
            log.info("run %s: its end was stored, its final answer never saved; posting it", run_id)
            renderer.post_final(final)
        await renderer.finish()

    async def _clicked(self, run_id: str) -> list[Control]:
        """A Cancel / Finish clicked for a parked run (taken: it is acted on once)."""
        if self.engine is None or self._run_store is None:
            return []
        return await self._controls_of.get(run_id) or []

    async def _take_controls(self, run_ids: list[str]) -> dict[str, list[Control]]:
        assert self.engine is not None  # `_clicked` asks only then
        taken: dict[str, list[Control]] = {}
        for control in await self.engine.take_controls(run_ids):
            taken.setdefault(control.run_id, []).append(control)
        return taken

    async def _stop(
        self, run_id: str, request: RunRequest, events: list[RunEvent], control: Control, saved: _Saved
    ) -> str:
        """A parked run woken by a Cancel / Finish now: end it without resuming its agents."""
        assert self._run_store is not None  # `_clicked` found one
        renderer = await self._renderer_for(run_id, request, RunView.of(events), saved)
        request = await self._restored(run_id, request)
        terminal = await stop_parked_run(
            run_id,
            request.choice.team,
            self._run_store,
            "finish_now" if control.action == "finish" else "cancel",
            by=control.by,
            tools=self._tools_factory(request.channel, renderer.thread),
            subscribers=self._subscribers(run_id, renderer),
        )
        await renderer.finish()
        return terminal.kind

    async def _saved(self, run_id: str) -> _Saved:
        """The run's coordinates and its saved status and progress posts, read concurrently."""
        where, (status, progress) = await asyncio.gather(
            self._coordinates.get(run_id), self._outbox.first_posts(run_id)
        )
        return _Saved(where, status, progress)

    async def _renderer_for(
        self, run_id: str, request: RunRequest, view: RunView | None, saved: _Saved
    ) -> RunRenderer:
        """The run's renderer: over the status message a previous process posted, else a new one.

        A crash can come at any point of a start: after the run's coordinates were recorded, or
        its status message saved or posted, but before the ts was written. Each is reused.
        """
        where = saved.where
        root = (
            MessageRef.existing(request.channel, where.root_ts)
            if where is not None and where.root_ts
            else self._outbox.root_of(saved.status)  # posted (or saved) before its ts was recorded
        )
        if root is not None:
            initial = view or dataclasses.replace(
                RunView.initial(task=request.task, requester=request.requester, now=self._clock()),
                run_id=run_id,
            )
            renderer = self._renderer(request, root, initial)
        else:
            renderer = self._open(run_id, request, view=view)
        if where is None:
            await self._store.record_run(run_id, request.channel, thread_ts=request.thread_ts)
        if where is None or not where.root_ts:
            self.spawn(self._remember_root(run_id, renderer), name=f"root-ts:{run_id}")
        return renderer

    async def _resume(
        self, run_id: str, request: RunRequest, events: list[RunEvent], saved: _Saved
    ) -> ActiveRun | None:
        """Continue a run (parked, or left by a dead process): its renderer from the stored events."""
        assert self._run_store is not None  # events came from it
        # One fold: the view after each event feeds the progress message, the last one the status.
        views = list(itertools.accumulate(events, RunView.apply, initial=RunView()))
        renderer = await self._renderer_for(run_id, request, views[-1], saved)
        self._restore_progress(renderer, events, views[1:], saved)
        renderer.refresh()  # its buttons (ids only) keep working: the run is alive again
        try:
            request = await self._restored(run_id, request)
            handle = await resume_run(
                run_id,
                request.choice.team,
                self._run_store,
                models=self._models,
                tools=self._tools_factory(request.channel, renderer.thread),
                subscribers=self._subscribers(run_id, renderer),
                events=events,  # just read from the same store
            )
        except Exception as exc:
            log.exception("run %s could not resume", run_id)
            renderer.failed_to_start(type(exc).__name__)
            return None
        log.info("run %s resumed", run_id)
        return ActiveRun(request=request, handle=handle, renderer=renderer)

    def _restore_progress(
        self, renderer: RunRenderer, events: list[RunEvent], views: list[RunView], saved: _Saved
    ) -> None:
        """The progress message an earlier segment posted is edited on, with what it showed.

        `views`: the run's view after each of `events`.
        """
        for event, view in zip(events, views, strict=True):
            renderer.progress.add(event, view)
        renderer.progress_message = self._outbox.root_of(saved.progress)

    async def _run(self, run_id: str, request: RunRequest) -> ActiveRun | None:
        if self.engine is None:  # inline: nothing of this run exists yet
            renderer = self._open(run_id, request)
            await self._store.record_run(run_id, request.channel, thread_ts=request.thread_ts)
            self.spawn(self._remember_root(run_id, renderer), name=f"root-ts:{run_id}")
        else:  # a step re-run after a crash before the run's first event: reuse what was made
            renderer = await self._renderer_for(run_id, request, None, await self._saved(run_id))
        log.info("run started in %s for %s", request.channel, request.requester)
        try:
            request = await self._bound(run_id, request)
        except OrchestratorError as exc:  # an unknown name, a fetch that failed: one line in the thread
            log.warning("run %s: its repository could not be prepared: %s", run_id, exc)
            renderer.failed_to_start(str(exc))
            return None
        try:
            handle = await start_run(
                request.choice.team,
                request.task,
                run_id=run_id,
                models=self._models,
                tools=self._tools_factory(request.channel, renderer.thread),
                store=self._run_store,
                requester=request.requester,
                context=request.context,
                subscribers=self._subscribers(run_id, renderer),
                team_name=request.choice.name,
                conversation=ConversationRef(
                    surface="slack", channel=request.channel, thread=request.thread_ts
                ),
            )
        except Exception as exc:
            log.exception("run %s could not start", run_id)
            renderer.failed_to_start(type(exc).__name__)
            return None
        log.info("run %s started", run_id)
        return ActiveRun(request=request, handle=handle, renderer=renderer)

    async def _bound(self, run_id: str, request: RunRequest) -> RunRequest:
        """A new run's request with its team bound to the run's repository, if it has one."""
        if self._repositories is None:
            return request
        name = None if request.selection is None else request.selection.repository
        team = await self._repositories.bind(
            run_id, request.choice.team, name=name, channel=request.channel, thread_ts=request.thread_ts
        )
        return self._with_team(request, team)

    async def _restored(self, run_id: str, request: RunRequest) -> RunRequest:
        """A stored run's request with the repository binding it started with."""
        if self._repositories is None:
            return request
        return self._with_team(request, await self._repositories.restore(run_id, request.choice.team))

    @staticmethod
    def _with_team(request: RunRequest, team: TeamConfig) -> RunRequest:
        if team is request.choice.team:
            return request
        return dataclasses.replace(request, choice=TeamChoice(name=request.choice.name, team=team))

    def _open(self, run_id: str, request: RunRequest, *, view: RunView | None = None) -> RunRenderer:
        """Post the status message at once (the ts arrives later) and build the run's renderer."""
        if view is None:
            initial = RunView.initial(task=request.task, requester=request.requester, now=self._clock())
            view = dataclasses.replace(initial, run_id=run_id)
        text, blocks = status_blocks(view, now=self._clock(), used=request.used())
        root = self._outbox.post(
            request.channel, text=text, blocks=blocks, thread=request.thread_ts, run_id=run_id
        )
        return self._renderer(request, root, view)

    def _renderer(self, request: RunRequest, root: MessageRef, view: RunView) -> RunRenderer:
        # A follow-up's status message sits in its parent's thread, so its posts go there too.
        thread: MessageRef | str = request.thread_ts or root
        return RunRenderer(
            self._outbox,
            request.channel,
            root,
            thread,
            view=view,
            clock=self._clock,
            broadcast=self._broadcast,
            progress_after=self._progress_after,
            used=request.used(),
        )

    async def _drive(self, active: ActiveRun) -> RunOutcome:
        """Until the run ends (then the last status) or parks; how it stands."""
        run_id = active.handle.run_id
        self._active[run_id] = active
        self._no_runs.clear()
        self.started += 1
        self.spawn(self._watch_root(run_id, active.renderer.root, active.request), name=f"root:{run_id}")
        if self._ticker is None or self._ticker.done():
            self._ticker = self.spawn(self._tick(), name="status-ticker")
        if self.engine is not None and (self._controls is None or self._controls.done()):
            self._controls = self.spawn(self._poll_controls(self.engine), name="run-controls")
        try:
            # The run store records the outcome (one truth about a run).
            outcome = await active.handle.outcome()
            if isinstance(outcome, Suspended):  # nothing unstored was shown: the status stays as stored
                active.parked = True
                log.warning("run suspended: %s", outcome.reason)
                return outcome
            if isinstance(outcome, Parked):  # its workflow waits for a wake; the status shows who is asked
                active.parked = True
                active.renderer.refresh()
                log.info("run parked, waiting for %s", ", ".join(outcome.waiting))
                return outcome
            log.info("run ended: %s", outcome.kind)
            await active.renderer.finish()
            return outcome
        finally:
            self._active.pop(run_id, None)
            if not self._active:
                self._no_runs.set()
            active.done.set()

    async def _tick(self) -> None:
        """Refresh quiet runs' status messages every `status_refresh` s; ends with the last run."""
        while self._active and not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._no_runs.wait(), self._status_refresh / 2)
            quiet_since = time.monotonic() - self._status_refresh
            for active in list(self._active.values()):
                active.renderer.show_progress()  # a long run's progress message is due even when quiet
                if active.renderer.last_refresh < quiet_since:
                    active.renderer.refresh()

    async def _poll_controls(self, engine: Engine) -> None:
        """Apply Cancel / Finish now asked on other processes to the runs held here."""
        while self._active and not self._closing:
            try:
                for control in await engine.take_controls(list(self._active)):
                    await self._apply(control)
            except Exception:  # a database hiccup: try again at the next poll
                log.exception("reading run controls failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._no_runs.wait(), engine.config.poll_interval)

    async def _apply(self, control: Control) -> None:
        active = self._active.get(control.run_id)
        if active is None:
            return
        if control.action == "finish":
            await active.handle.finish_now(by=control.by)
        else:
            await active.handle.cancel(by=control.by)

    def _on_give_up(self, event: GiveUp) -> None:
        """A post of a run was given up after the outbox's retry window: its requester is told once.

        The status message's own failure is `_watch_root`'s (it stops the run and says why).
        """
        run_id = event.run_id
        active = self._active.get(run_id or "")
        if (
            run_id is None
            or run_id in self._told
            or (active and active.renderer.root.marker == event.post_id)
        ):
            return
        self._told[run_id] = None
        if len(self._told) > RECENT_SUBMITS:
            self._told.pop(next(iter(self._told)))
        self.spawn(self._tell_given_up(run_id, event, active), name=f"given-up:{run_id}")

    async def _tell_given_up(self, run_id: str, event: GiveUp, active: ActiveRun | None) -> None:
        requester = active.request.requester if active is not None else await self._requester_of(run_id)
        if requester is None:
            return
        text = (
            f"Slack did not take some of the messages of run `{run_id}` (its status or answer may be "
            f"missing in the channel: {event.error or event.reason}). `/massgen status {run_id}` shows "
            "how it stands."
        )
        try:
            await self._outbox.ephemeral(event.channel, requester, text=text)
            return
        except OutboxError as exc:
            log.warning("run %s: telling %s in the channel failed (%s); trying a DM", run_id, requester, exc)
        try:
            opened = await self._outbox.call("conversations.open", users=requester)
            dm = str((opened.get("channel") or {}).get("id") or "")
            if dm:
                await self._outbox.call("chat.postMessage", channel=dm, text=text)
        except OutboxError as exc:
            log.error("run %s: its requester could not be told that Slack lost a post: %s", run_id, exc)

    async def _requester_of(self, run_id: str) -> str | None:
        if self._run_store is None:
            return None
        events = await self._run_store.events(run_id)
        started = events[0] if events else None
        return getattr(started, "requester", None)

    async def _watch_root(self, run_id: str, root: MessageRef, request: RunRequest) -> None:
        """If the status message cannot be posted (bot not in the channel), stop the run and say why."""
        try:
            await root.ts()
            return
        except OutboxError as exc:
            reason = exc.error or "posting failed"
        active = self._active.get(run_id)
        if active is not None:
            await active.handle.cancel(by="slack")
        if reason not in _NOT_A_MEMBER:  # Slack itself failed for the whole retry window
            text = (
                f"Slack did not take this run's status message ({reason}) for as long as I retried, "
                "so the run was stopped. Please try again in a few minutes."
            )
        elif request.channel.startswith("D"):  # a DM cannot be joined with /invite
            text = (
                f"I could not post in this conversation ({reason}), so the run was stopped. "
                "Start it in a channel I am in, or in a direct message with me (my Messages tab)."
            )
        else:
            text = (
                f"I could not post in this channel ({reason}), so the run was stopped. "
                "Invite me with `/invite @MassGen` (private channels need it), then try again."
            )
        await self._tell_requester(request, text)

    async def _tell_requester(self, request: RunRequest, text: str) -> None:
        if request.response_url:
            webhook = AsyncWebhookClient(request.response_url)
            await webhook.send(text=text, response_type="ephemeral")
        else:
            await self._outbox.ephemeral(request.channel, request.requester, text=text)

    def _subscribers(self, run_id: str, renderer: RunRenderer) -> list[Callable[[RunEvent], None]]:
        observe = self._observe
        if observe is None:
            return [renderer.on_event]
        return [renderer.on_event, lambda event: observe(run_id, event)]

    async def _remember_root(self, run_id: str, renderer: RunRenderer) -> None:
        try:
            ts = await renderer.root.ts()
        except OutboxError:
            return  # never posted: `_watch_root` tells the requester
        renderer.show_progress()  # the thread exists now: what the run did so far can be shown
        await self._store.set_root(run_id, ts)

    def _tools_factory(
        self, channel: str, thread: MessageRef | str
    ) -> Callable[[RunContext], Awaitable[RunTools]] | None:
        builder = self._tools
        if builder is None:
            return None
        port = ThreadApprovalPort(self._approvals, channel, thread)

        async def factory(ctx: RunContext) -> RunTools:
            return await builder(ctx, port)

        return factory

    def active(self, run_id: str) -> ActiveRun | None:
        return self._active.get(run_id)

    def active_runs(self, channel: str | None = None) -> list[ActiveRun]:
        return [r for r in self._active.values() if channel is None or r.request.channel == channel]

    async def stop(self, *, grace: float = 10.0) -> int:
        """Shutdown: accept no more runs; with an engine, let runs end within `grace` s and leave the rest.

        A run left behind stays pending in the engine and resumes on the next start (or on another
        worker); its approvals stay open. Without an engine, runs and their approvals are cancelled.
        Returns how many runs were left running.
        """
        self._closing = True
        if self.engine is not None:
            self.engine.drain()
            pending = [a.done.wait() for a in self._active.values()]
            if pending:
                await asyncio.wait([asyncio.ensure_future(p) for p in pending], timeout=grace)
            self._no_runs.set()
            return len(self._active)
        self._no_runs.set()
        for active in list(self._active.values()):
            # The run's own close cancels its asks ("the run was cancelled by shutdown"); this catches
            # any its close could not reach before the process goes.
            await active.handle.cancel(by="shutdown")
            await self._approvals.cancel_run(active.handle.run_id, "the bot shut down")
        return 0


__all__ = ["ActiveRun", "RunRequest", "RunSupervisor", "ToolsBuilder"]
