"""The worker's half of a run: the engine's step drives it, renders its events, saves its end.

The engine runs each submitted run as a durable workflow whose step calls `execute` here, in
whichever worker dequeues it; after a crash the step runs again and `execute` resumes the run from
the run store, rebuilding its renderer from the stored view and the Slack coordinates
(`Renderers`). A store that is away suspends the step (it runs again later) rather than failing
the run. The front end's half is `RunSubmitter`; the two meet at one `Handover`. Its tasks (its
status ticker, its watchers) belong to the bot's one `TaskSupervisor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError

from approvals import ApprovalService, ConversationRef
from bot.approval_ui.port import ThreadApprovalPort
from bot.batched import Batched
from bot.engine.config import FENCED, PARKED, SUSPENDED
from bot.errors import OutboxError
from bot.ops import bind_request, bind_run
from bot.runs.notices import RequesterNotices
from bot.runs.presenter import RunRenderer
from bot.runs.renderers import Renderers, Saved
from bot.runs.repositories import RunRepositories
from bot.runs.request import RunRequest
from bot.runs.submitter import Handover
from bot.runs.teams import TeamCatalog, TeamChoice
from bot.slack.outbox import GiveUp, MessageRef, Outbox
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
    from sqlalchemy.ext.asyncio import AsyncConnection

    from bot.engine import Control, Engine

log = logging.getLogger(__name__)


# (run context, approval port) -> run tools; None runs agents with the workflow tools only.
ToolsBuilder = Callable[[RunContext, ThreadApprovalPort], Awaitable[RunTools]]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutorOptions:
    """What the executor is built from: one object, which the supervisor passes through unopened."""

    tasks: TaskSupervisor
    outbox: Outbox
    store: BotStore
    approvals: ApprovalService
    run_store: RunStore | None = None  # None: runs keep no events (tests of the Slack side only)
    tools: ToolsBuilder | None = None
    clock: Callable[[], float] = time.time
    broadcast_final: bool = False
    observe: Callable[[str, RunEvent], None] | None = None
    status_refresh: float = 30.0  # seconds between refreshes of a quiet run's status message
    progress_after: float = 20.0  # seconds before a run's progress gets a message of its own
    models: ModelFactory | None = None
    teams: TeamCatalog | None = None
    repositories: RunRepositories | None = None


class RunExecutor:
    """Drives the runs the engine hands this process; their tasks belong to `tasks`."""

    def __init__(self, options: ExecutorOptions, *, engine: Engine, handover: Handover) -> None:
        o = options
        self._outbox = o.outbox
        self._teams = o.teams
        self._repositories = o.repositories  # None: runs never name a repository (tests, benches)
        self.engine = engine
        self._approvals = o.approvals
        self._run_store = o.run_store
        self._tools = o.tools
        self._clock = o.clock
        self._models = o.models  # None: each run builds its own clients (the runner's default)
        self._observe = o.observe  # metrics hook (the bench measures event-to-Slack freshness with it)
        self._tasks = o.tasks
        self._active: dict[str, ActiveRun] = {}
        self._closing = False
        # A run waiting on a human emits nothing; its elapsed time still moves. chat.update is a
        # shared Tier 3 budget, so quiet runs are refreshed rarely and the outbox paces them.
        self._status_refresh = o.status_refresh
        self._ticker: asyncio.Task[Any] | None = None
        self._controls: asyncio.Task[Any] | None = None
        # Looked up for many resumes at once after a restart (one query each, not one per run).
        self._controls_of = Batched(self._take_controls)
        self._handover = handover  # shared with this process's submitter
        self._renderers = Renderers(
            outbox=o.outbox,
            store=o.store,
            spawn=self.spawn_named,
            clock=o.clock,
            broadcast_final=o.broadcast_final,
            progress_after=o.progress_after,
        )
        self._no_runs = asyncio.Event()  # wakes the ticker when the last run ends
        self._notices = RequesterNotices(o.outbox, o.run_store, self.spawn_named)
        o.outbox.on_give_up.append(self._on_give_up)
        self.started = 0

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """A task owned by the bot's task supervisor."""
        return self._tasks.spawn(coro, name=name)

    def spawn_named(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self._tasks.spawn(coro, name=name)

    async def implied_writes(
        self, conn: AsyncConnection, events: tuple[RunEvent, ...]
    ) -> Callable[[], None] | None:
        """The run store's `implied`: a run's end is stored with its final answer's posts.

        Only for a run this process drives (its renderer holds the view and the thread); a run's
        end stored otherwise (a process that died first) is settled at its next step (`_settle`).
        """
        finished = [event for event in events if isinstance(event, RunFinished)]
        active = self._active.get(finished[-1].run_id) if finished else None
        if active is None:
            return None
        return await active.renderer.save_final_within(conn, finished[-1])

    async def segment_ended(self, run_id: str) -> bool | None:
        """None when this process does not drive `run_id`; else, once its segment ends, whether it parked."""
        active = self._active.get(run_id)
        if active is None:
            return None
        await active.done.wait()
        return active.parked

    async def execute(self, run_id: str, payload: dict[str, Any]) -> str:
        """The engine's step: start the run, or resume it after a crash; how it ended.

        The run is a task of the bot's task supervisor (so shutdown and `wait_idle` see it).
        """
        if self._teams is None:
            raise RuntimeError("a supervisor that executes engine runs needs the team catalog")
        request = RunRequest.of(payload, self._teams)
        task = self.spawn(self._execute(run_id, request), name=f"run:{run_id}")
        self._handover.begun(run_id)
        outcome: str = await asyncio.shield(task)
        if outcome != PARKED:
            self._handover.begun(run_id)  # it ended: a wake sent meanwhile resumes nothing
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
            controls, saved = await asyncio.gather(self._clicked(run_id), self._renderers.saved(run_id))
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
        saved = await self._renderers.saved(run_id)
        renderer = await self._renderers.restored(run_id, request, events, saved)
        final = events[-1]
        if isinstance(final, RunFinished) and not await self._outbox.final_saved(run_id):
            log.info("run %s: its end was stored, its final answer never saved; posting it", run_id)
            renderer.post_final(final)
        await renderer.finish()
        await self._final_saved(run_id, renderer)

    async def _final_saved(self, run_id: str, renderer: RunRenderer) -> None:
        """A step that ends a run ends once its final answer is saved; else (unsaved, it is not sent
        either) it fails like a store write, and the step runs again (`_settle` posts it)."""
        if not await self._outbox.saved(renderer.final_posts):
            raise RunStoreError(f"run {run_id}: its final answer could not be saved")

    async def _clicked(self, run_id: str) -> list[Control]:
        """A Cancel / Finish clicked for a parked run (taken: it is acted on once)."""
        if self._run_store is None:
            return []
        return await self._controls_of.get(run_id) or []

    async def _take_controls(self, run_ids: list[str]) -> dict[str, list[Control]]:
        taken: dict[str, list[Control]] = {}
        for control in await self.engine.take_controls(run_ids):
            taken.setdefault(control.run_id, []).append(control)
        return taken

    async def _stop(
        self, run_id: str, request: RunRequest, events: list[RunEvent], control: Control, saved: Saved
    ) -> str:
        """A parked run woken by a Cancel / Finish now: end it without resuming its agents."""
        assert self._run_store is not None  # `_clicked` found one
        renderer = await self._renderers.renderer_for(run_id, request, RunView.of(events), saved)
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

    async def _resume(
        self, run_id: str, request: RunRequest, events: list[RunEvent], saved: Saved
    ) -> ActiveRun | None:
        """Continue a run (parked, or left by a dead process): its renderer from the stored events."""
        assert self._run_store is not None  # events came from it
        renderer = await self._renderers.restored(run_id, request, events, saved)
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

    async def _run(self, run_id: str, request: RunRequest) -> ActiveRun | None:
        # A step run again after a crash before the run's first event reuses what was made.
        renderer = await self._renderers.renderer_for(
            run_id, request, None, await self._renderers.saved(run_id)
        )
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

    async def _drive(self, active: ActiveRun) -> RunOutcome:
        """Until the run ends (then the last status) or parks; how it stands."""
        run_id = active.handle.run_id
        self._active[run_id] = active
        self._no_runs.clear()
        self.started += 1
        self.spawn(self._watch_root(run_id, active.renderer.root, active.request), name=f"root:{run_id}")
        if self._ticker is None or self._ticker.done():
            self._ticker = self.spawn(self._tick(), name="status-ticker")
        if self._controls is None or self._controls.done():
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
            await self._final_saved(run_id, active.renderer)
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
        """A run's post was given up: its requester hears once (not for the status message, whose
        failure `_watch_root` reports)."""
        active = self._active.get(event.run_id or "")
        if active is not None and active.renderer.root.marker == event.post_id:
            return
        self._notices.given_up(event, None if active is None else active.request.requester)

    async def _watch_root(self, run_id: str, root: MessageRef, request: RunRequest) -> None:
        """If the status message cannot be posted, stop the run and say why."""
        try:
            await root.ts()
            return
        except OutboxError as exc:
            reason = exc.error or "posting failed"
        active = self._active.get(run_id)
        if active is not None:
            await active.handle.cancel(by="slack")
        await self._notices.root_failed(request.channel, request.requester, request.response_url, reason)

    def _subscribers(self, run_id: str, renderer: RunRenderer) -> list[Callable[[RunEvent], None]]:
        observe = self._observe
        if observe is None:
            return [renderer.on_event]
        return [renderer.on_event, lambda event: observe(run_id, event)]

    def _tools_factory(
        self, channel: str, thread: MessageRef | str
    ) -> Callable[[RunContext], Awaitable[RunTools]] | None:
        builder = self._tools
        if builder is None:
            return None
        port = ThreadApprovalPort(self._approvals, channel, thread)

        async def factory(ctx: RunContext) -> RunTools:
            try:
                return await builder(ctx, port)
            except SQLAlchemyError as exc:  # the database away: the run suspends (fail-stop), not fails
                raise RunStoreError(f"run {ctx.run_id}: its tools need the database: {exc}") from exc

        return factory

    def active(self, run_id: str) -> ActiveRun | None:
        return self._active.get(run_id)

    def active_runs(self, channel: str | None = None) -> list[ActiveRun]:
        return [r for r in self._active.values() if channel is None or r.request.channel == channel]

    async def stop(self, *, grace: float = 10.0) -> int:
        """Shutdown: take up no more runs; let runs end within `grace` s and leave the rest.

        A run left behind stays pending in the engine and resumes on the next start (or on another
        worker); its approvals stay open. Returns how many runs were left running.
        """
        self._closing = True
        self.engine.drain()
        pending = [a.done.wait() for a in self._active.values()]
        if pending:
            await asyncio.wait([asyncio.ensure_future(p) for p in pending], timeout=grace)
        self._no_runs.set()
        return len(self._active)


__all__ = ["ActiveRun", "RunExecutor", "ToolsBuilder"]
