"""The run supervisor: starts runs for Slack, renders their events through the outbox, stops them on shutdown.

Its tasks (each run, its status ticker, its watchers) belong to the bot's one `TaskSupervisor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.webhook.async_client import AsyncWebhookClient

from approvals import ApprovalService, ConversationRef
from bot.approval_ui.port import ThreadApprovalPort
from bot.errors import OutboxError
from bot.ops import bind_run
from bot.runs.blocks import status_blocks
from bot.runs.presenter import RunRenderer
from bot.runs.teams import TeamChoice
from bot.slack.outbox import MessageRef, Outbox
from bot.slack.store import BotStore
from bot.tasks import TaskSupervisor
from orchestrator import (
    ModelFactory,
    RunContext,
    RunEvent,
    RunHandle,
    RunStore,
    RunTools,
    RunView,
    TeamConfig,
    start_run,
)

log = logging.getLogger(__name__)

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


@dataclass(slots=True, kw_only=True)
class ActiveRun:
    """A run this process is driving."""

    request: RunRequest
    handle: RunHandle
    renderer: RunRenderer
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def team(self) -> TeamConfig:
        return self.request.choice.team


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
    ) -> None:
        self._outbox = outbox
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
        self._no_runs = asyncio.Event()  # wakes the ticker when the last run ends
        self.started = 0

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """A task owned by the bot's task supervisor."""
        return self._tasks.spawn(coro, name=name)

    def start(self, request: RunRequest) -> None:
        """Start a run in the background; returns at once (listeners have already acked)."""
        if self._closing:
            raise RuntimeError("the bot is shutting down")
        self.spawn(self._run(request), name=f"run:{request.channel}")

    async def _run(self, request: RunRequest) -> None:
        run_id = f"run-{secrets.token_hex(6)}"
        bind_run(run_id)  # this task and the run's tasks log with its id
        log.info("run started in %s for %s", request.channel, request.requester)
        renderer = self._open(run_id, request)
        await self._store.record_run(run_id, request.channel, thread_ts=request.thread_ts)
        self.spawn(self._remember_root(run_id, renderer), name=f"root-ts:{run_id}")
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
            return
        await self._drive(ActiveRun(request=request, handle=handle, renderer=renderer))

    def _open(self, run_id: str, request: RunRequest) -> RunRenderer:
        """Post the status message at once (the ts arrives later) and build the run's renderer."""
        initial = RunView.initial(task=request.task, requester=request.requester, now=self._clock())
        view = dataclasses.replace(initial, run_id=run_id)
        text, blocks = status_blocks(view, now=self._clock())
        root = self._outbox.post(
            request.channel, text=text, blocks=blocks, thread=request.thread_ts, run_id=run_id
        )
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
        )

    async def _drive(self, active: ActiveRun) -> None:
        """Until the run ends: then the last status."""
        run_id = active.handle.run_id
        self._active[run_id] = active
        self._no_runs.clear()
        self.started += 1
        self.spawn(self._watch_root(run_id, active.renderer.root, active.request), name=f"root:{run_id}")
        if self._ticker is None or self._ticker.done():
            self._ticker = self.spawn(self._tick(), name="status-ticker")
        try:
            outcome = await active.handle.wait()  # the run store records the outcome (one truth about a run)
            log.info("run ended: %s", outcome.kind)
            await active.renderer.finish()
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
        if request.channel.startswith("D"):  # a DM cannot be joined with /invite
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

    async def stop(self) -> None:
        """Shutdown: accept no more runs, cancel the running ones and their approvals."""
        self._closing = True
        self._no_runs.set()
        for active in list(self._active.values()):
            # The run's own close cancels its asks ("the run was cancelled by shutdown"); this catches
            # any its close could not reach before the process goes.
            await active.handle.cancel(by="shutdown")
            await self._approvals.cancel_run(active.handle.run_id, "the bot shut down")


__all__ = ["ActiveRun", "RunRequest", "RunSupervisor", "ToolsBuilder"]
