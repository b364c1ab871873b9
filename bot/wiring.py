"""The composition root: storage, approval service + expiry scheduler, outbox, and the rooms.

`build_services(settings)` is the only place that knows every layer (Slack serves through it);
`open_storage(settings)` (`bot.storage`) is its storage half, which `massgen-bot run` uses too, so
both surfaces keep runs and approvals in the same SQL stores. `Services.close()` stops runs, drains
tasks, stops the scheduler, flushes the outbox and disposes of the database, in that order. The Slack half is
imported inside `build_services`: the terminal runner's start-up must not pay for the Slack SDK.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from approvals import ApprovalService
from bot.recovery import recover
from bot.settings import BotSettings, secret
from bot.slack.store import BotStore
from bot.storage import Storage, open_storage
from orchestrator import SqlRunStore

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient
    from sqlalchemy.ext.asyncio import AsyncEngine

    from approvals import ExpiryScheduler
    from bot.approval_ui import ApprovalsUI, ApprovalUseCases, ThreadApprovalPort
    from bot.channel_settings import ChannelSettings
    from bot.engine import Engine
    from bot.home import HomeTab
    from bot.ops import Metrics
    from bot.runs import RunUseCases, SharedModels, TeamCatalog, ToolsBuilder
    from bot.slack import Outbox
    from bot.tasks import TaskSupervisor
    from orchestrator import RunContext, RunEvent, RunTools, SnapshotLimits, TeamConfig, WorkspaceStore

log = logging.getLogger(__name__)

# A readiness check: None when ready, else why not (shown by /readyz). The engine adds its own.
ReadyCheck = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxOptions:
    """Pacing knobs. Production keeps Slack's limits; tests and benches compress time with `scaled`."""

    update_interval: float = 2.0
    channel_interval: float = 1.0
    # Slack allows 50+/min per workspace for Tier 3 (chat.update); the outbox's bucket adds a small
    # burst on top, and calls bunch up in flight, so keep clear headroom below 50.
    tier3_per_minute: int = 40
    tier2_per_minute: int = 18
    budget_window: float = 60.0
    # Per Web API call; a post answered later is looked up by its marker, never posted twice.
    call_timeout: float = 10.0
    # How long a post or an update is retried through 5xx, timeouts and 429s before it is given up
    # (the requester is then told), and the backoff's cap between tries: at 8 s a post reaches Slack
    # within about 8 s of its return (30 s made it 19 s after a 20 s outage), for one try per
    # method every 8 s while it is away (a 429's Retry-After still comes first).
    retry_window: float = 900.0
    retry_max_delay: float = 8.0

    def scaled(self, factor: float) -> OutboxOptions:
        """The same budgets over `factor` times the time (0.02: a minute lasts 1.2 s)."""
        return replace(
            self,
            update_interval=self.update_interval * factor,
            channel_interval=self.channel_interval * factor,
            budget_window=self.budget_window * factor,
            retry_window=self.retry_window * factor,
            retry_max_delay=self.retry_max_delay * factor,
        )


@dataclass(slots=True, kw_only=True)
class Services:
    """What one bot process is made of: the rooms the listeners call, and what shutdown closes."""

    settings: BotSettings
    client: AsyncWebClient
    tasks: TaskSupervisor
    outbox: Outbox
    storage: Storage
    runs: RunUseCases
    approval_ui: ApprovalUseCases
    channels: ChannelSettings
    home: HomeTab
    presenter: ApprovalsUI
    scheduler: ExpiryScheduler
    models: SharedModels
    engine: Engine
    bot_token: str
    signing_secret: str
    metrics: Metrics
    identity: dict[str, str] = field(default_factory=dict)
    # /readyz: the database and Slack auth always; more by name (the durable engine: "engine").
    ready_checks: dict[str, ReadyCheck] = field(default_factory=dict)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)  # ends the retention loop
    # The retention sweep lives as long as the process, so it is not one of `tasks` (which tests and
    # the drain wait out); `close()` stops it first.
    retention: asyncio.Task[None] | None = None
    unseen: asyncio.Task[None] | None = None  # the sweep that posts asks a dead process never posted
    left_running: int = 0  # runs left pending in the engine at shutdown (they resume elsewhere or later)

    @property
    def store(self) -> BotStore:
        """The bot's own tables (Slack coordinates)."""
        return self.storage.store

    @property
    def run_store(self) -> SqlRunStore:
        """The orchestrator's run store."""
        return self.storage.run_store

    @property
    def approvals(self) -> ApprovalService:
        """The approval service every surface decides through."""
        return self.storage.approvals

    async def close(self, *, grace: float = 10.0) -> None:
        """Stop taking runs, let short ones end, drain tasks, stop timers, flush Slack, release the database.

        Runs still going after `grace` stay pending in the engine (their approvals stay open): the
        next start, or another worker, resumes them. The parts share the one deadline (runs get it
        less a reserve for the posts they end with), so a stop takes `grace`, not one per part; what
        the outbox could not send by then stays saved for the next process.
        """
        end = time.monotonic() + grace

        def left() -> float:
            return max(end - time.monotonic(), 0.0)

        self.stopping.set()
        for sweep in (self.retention, self.unseen):
            if sweep is not None:
                await sweep
        reserve = min(2.0, grace * 0.3)  # for the final answers and statuses runs end with
        self.left_running = await self.runs.supervisor.stop(grace=max(left() - reserve, 0.0))
        await self.tasks.drain(grace=left(), keep="run:" if self.left_running else None)
        self.presenter.detach()
        await self.scheduler.stop()
        await self.engine.close(destroy=not self.left_running)
        await self.outbox.close(drain=True, timeout=left())
        if not self.left_running:  # a run left behind may still hold a client: the process ends anyway
            await self.models.aclose()
        await self.engine.leave()
        await self.storage.close()


def make_client(settings: BotSettings) -> AsyncWebClient:
    """The Web API client every call goes through (`SLACK_API_URL` redirects it, Socket Mode included).

    Only 5xx retries are added: the outbox handles 429 itself (globally, honouring Retry-After), and
    a blind retry of `chat.postMessage` after a timeout could post twice.
    """
    from slack_sdk.http_retry.builtin_async_handlers import AsyncServerErrorRetryHandler
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(token=secret(settings.slack_bot_token) or None, base_url=settings.api_url())
    client.retry_handlers.append(AsyncServerErrorRetryHandler(max_retry_count=1))
    return client


def default_tools(
    workspace_root: Path | None = None,
    snapshots: WorkspaceStore | None = None,
    limits: SnapshotLimits | None = None,
) -> ToolsBuilder:
    """Real tools (files, shell in the sandbox, fetch) behind the permission gate.

    Agents' workspaces live under `workspace_root` (`MASSGEN_STATE_DIR/workspaces`), else in a
    temporary directory; each run's folder is removed when the run ends. With `snapshots` they are
    checkpointed into the database, so a run taken over on another machine finds its files.
    """
    from orchestrator import SnapshotLimits, build_run_tools

    bounds = limits or SnapshotLimits()

    async def build(ctx: RunContext, port: ThreadApprovalPort) -> RunTools:
        tools: RunTools = await build_run_tools(
            ctx, approvals=port, root=workspace_root, snapshots=snapshots, limits=bounds
        )
        return tools

    return build


def _async(call: Callable[[str, Any], None]) -> Callable[[str, Any], Awaitable[None]]:
    async def send(run_id: str, message: Any) -> None:
        call(run_id, message)

    return send


def _tools(
    choice: ToolsBuilder | Literal["real", "none"],
    state_dir: Path | None = None,
    *,
    engine: AsyncEngine | None = None,
    settings: BotSettings | None = None,
) -> ToolsBuilder | None:
    if choice == "real":
        from orchestrator import SnapshotLimits, SqlWorkspaceStore

        mb = 1024 * 1024
        limits = None
        if settings is not None:
            limits = SnapshotLimits(
                run_bytes=int(settings.snapshot_mb * mb), file_bytes=int(settings.snapshot_file_mb * mb)
            )
        store = None if engine is None else SqlWorkspaceStore(engine)
        return default_tools(None if state_dir is None else state_dir / "workspaces", store, limits)
    return None if choice == "none" else choice


async def identify(client: AsyncWebClient, *, within: float = 3.0) -> dict[str, str]:
    """`auth.test` once at start-up, best effort: the bot's user id lets Bolt ignore its own events."""
    try:
        response = await asyncio.wait_for(client.auth_test(), within)
    except Exception as exc:  # a stand-in without auth.test, or no network yet: run without the ids
        log.warning("auth.test failed (%s); continuing without the bot's identity", exc)
        return {}
    keys = ("user_id", "bot_id", "team_id", "enterprise_id")
    return {k: str(response.get(k)) for k in keys if response.get(k)}


def _share_slack_budget(box: Outbox, live: int) -> None:
    """The app's processes share its Slack budget: each keeps 1 / live of every rate."""
    share = 1.0 / live
    if share != box.share:
        log.info("slack budget: %d live process(es) share it; this one keeps 1/%d", live, live)
        box.set_share(share)


def _make_outbox(
    client: AsyncWebClient, options: OutboxOptions, engine: AsyncEngine, *, owner: str | None = None
) -> Outbox:
    from bot.slack import Outbox, OutboxStore

    return Outbox(
        client,
        update_interval=options.update_interval,
        channel_interval=options.channel_interval,
        tier3_per_minute=options.tier3_per_minute,
        tier2_per_minute=options.tier2_per_minute,
        budget_window=options.budget_window,
        call_timeout=options.call_timeout,
        retry_window=options.retry_window,
        retry_max_delay=options.retry_max_delay,
        # Every post is saved before it is sent; start() sends what this executor left unsent.
        store=OutboxStore(engine, owner=owner),
    )


async def build_services(
    settings: BotSettings,
    *,
    team_file: Path | None = None,
    team: TeamConfig | None = None,
    client: AsyncWebClient | None = None,
    tools: ToolsBuilder | Literal["real", "none"] = "real",
    outbox: OutboxOptions | None = None,
    clock: Callable[[], float] = time.time,
    observe: Callable[[str, RunEvent], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Services:
    """Wire every layer for one process. `tools="none"` runs agents with the workflow tools only.

    `team` (the playground's) is the default team as given; otherwise it comes from `team_file`.
    `progress` hears each start-up phase as it begins (what `/readyz` says until the process serves).

    The engine launches paused: the runs it recovers resume only once the start-up work that
    belongs before them is done (orphans failed, settled runs woken, expiry timers, the SDKs
    warmed). Otherwise a hundred runs resuming on this one loop starve that work, and the process
    serves only after most of them have ended.
    """
    phase = progress or _quiet
    from approvals import ExpiryScheduler
    from bot.approval_ui import ApprovalsUI, ApprovalUseCases, ApproverDMs, pending_for
    from bot.engine import engine_config, wake_on_decisions, wake_settled
    from bot.engine.config import state_folder
    from bot.home import ChannelAccess, HomeTab
    from bot.ops import Metrics, observer, subscribe_all
    from bot.runs import (
        ExecutorOptions,
        RunHistory,
        RunRepositories,
        RunSupervisor,
        RunUseCases,
        SharedModels,
        TeamCatalog,
    )
    from bot.slack import GroupResolver
    from bot.tasks import TaskSupervisor
    from orchestrator import default_models, sandbox_status, tidy_ready_copies, warm_up
    from orchestrator.repos import RepoCache

    if team is not None:
        teams = TeamCatalog(team, teams_dir=settings.teams_dir)
    else:
        teams = TeamCatalog.load(team_file or settings.team_file, settings.teams_dir)
    for why in teams.problems().values():  # before a user's `--team NAME` finds out
        log.warning("teams: %s", why)
    config = engine_config(settings)
    # Say before any run whether agents' commands can run confined here, not after an approver said yes.
    if (problem := await sandbox_status(teams.default.team.sandbox)) is not None:
        log.warning("sandbox: %s", problem)
    # Import the model SDKs and stream one canned turn through each, off the event loop: done lazily
    # by the first run, the imports and the SDKs' schema builds would stall acks and transactions.
    # It overlaps the database, the outbox and the engine's recovery (resumed runs load an SDK they
    # need in the loader thread anyway); the listeners start only once it is done. DBOS's import
    # (~0.5 s) runs in a thread meanwhile, and so stays off the event loop.
    engine_module = asyncio.create_task(asyncio.to_thread(importlib.import_module, "bot.engine.engine"))
    warming = None
    if config.executes:  # a front end never calls a model
        types = [a.backend.type for a in teams.default.team.agents]
        warming = asyncio.create_task(asyncio.to_thread(warm_up, types), name="warm-up")
    client = client or make_client(settings)
    identity = asyncio.create_task(identify(client), name="identify")  # a round trip: meanwhile
    phase("opening the database")
    db = await open_storage(settings)
    pacing = outbox or OutboxOptions().scaled(settings.slack_minute / 60.0)
    box = _make_outbox(client, pacing, db.engine, owner=settings.executor_id)
    remind = timedelta(seconds=teams.default.team.approvals.remind_before_seconds)
    scheduler = ExpiryScheduler(db.approvals, remind_before=remind)
    engine: Engine = (await engine_module).Engine(config, db.engine)
    # Every model request waits for its provider's limits, held by all workers together.
    models = SharedModels(functools.partial(default_models, admission=engine.admission))
    if config.executes:
        models.prebuild(teams.default.team.agents)
    tasks = TaskSupervisor()
    repos = RepoCache(state_folder(settings))
    if config.executes:  # pools of agents' copies no run asks for any more, and a killed refill's leftovers
        tasks.spawn(asyncio.to_thread(tidy_ready_copies, repos.root), name="tidy-ready-copies")
    metrics = Metrics(clock)
    options = ExecutorOptions(
        tasks=tasks,
        outbox=box,
        store=db.store,
        approvals=db.approvals,
        run_store=db.run_store,
        # Workspaces outlive the process (a parked or crashed run resumes in them): under the state folder.
        tools=_tools(tools, state_folder(settings), engine=db.engine, settings=settings),
        clock=clock,
        observe=observer(metrics, observe),
        broadcast_final=settings.broadcast_final,
        status_refresh=settings.status_refresh,
        progress_after=settings.progress_after,
        models=models,
        teams=teams,
        repositories=RunRepositories(db.engine, repos),
    )
    supervisor = RunSupervisor(options, engine=engine)
    db.run_store.implied = supervisor.executor.implied_writes  # a run's end and its answer: one commit
    engine.admission.observe = metrics.observe_admission
    engine.on_takeover = box.take_over  # a dead executor's runs and its unsent posts move together
    engine.on_peers = functools.partial(_share_slack_budget, box)
    groups = GroupResolver(box.call, ttl=settings.group_cache_ttl)
    dms = ApproverDMs(box, db.store, groups.members, policy=settings.approval_dms)
    spawn_ui = functools.partial(tasks.spawn, name="approvals-ui")
    presenter = ApprovalsUI(db.approvals, box, db.store, spawn=spawn_ui, clock=clock, dms=dms)
    # The Home tab lists exactly what `/massgen approvals` lists: the one "pending for this user" query.
    pending = functools.partial(pending_for, db.approvals, groups_of=groups.groups_of)
    history = RunHistory(db.run_store, db.store)
    access = ChannelAccess(box.call)  # who may see which runs in their Home tab
    home = HomeTab(
        pending=pending,
        recent_runs=history.recent,
        outbox=box,
        tasks=tasks,
        clock=clock,
        access=access,
        groups_of=groups.groups_of,
    )
    approval_ui = ApprovalUseCases(db.approvals, groups, presenter, box, refresh_home=home.publish)
    presenter.on_change = home.refresh
    presenter.attach()
    subscribe_all(metrics, db.approvals, box)
    await box.start()
    # Launching recovers this executor's pending runs (its step resumes each from the run store,
    # once the steps open below).
    phase("launching the engine")
    await engine.launch(supervisor if config.executes else None, paused=True)
    wake_on_decisions(db.approvals, _async(supervisor.wake))  # a parked run resumes wherever it is decided
    phase("recovering runs")
    await recover(history, db.approvals, box, held=engine.holding)
    # A decision stored just before a crash, its wake never sent: the run would wait for its timeout.
    left = [run.run_id for run in await history.left_running()]
    await wake_settled(db.run_store, db.approvals, left, _async(supervisor.wake))
    await scheduler.start()  # expiry timers are rebuilt from the pending approvals
    channels = _channel_settings(teams, db.engine, box.call, groups.groups_of)
    runs = RunUseCases(
        supervisor=supervisor, teams=teams, history=history, groups_of=groups.groups_of, channels=channels
    )
    services = Services(
        settings=settings,
        client=client,
        tasks=tasks,
        outbox=box,
        storage=db,
        runs=runs,
        approval_ui=approval_ui,
        channels=channels,
        home=home,
        presenter=presenter,
        scheduler=scheduler,
        models=models,
        engine=engine,
        bot_token=secret(settings.slack_bot_token),
        signing_secret=secret(settings.slack_signing_secret),
        metrics=metrics,
        identity=await identity,
    )
    services.ready_checks["engine"] = engine.ready
    _start_retention(services)
    services.unseen = asyncio.create_task(presenter.watch_unseen(services.stopping), name="unseen-asks")
    if warming is not None:
        phase("warming the model SDKs")
        await warming  # serving means warmed: no ack waits for an SDK import
    engine.open_steps()
    return services


def _quiet(_: str) -> None:
    """No one listens to the start-up's phases."""


def _channel_settings(teams: TeamCatalog, engine: AsyncEngine, call: Any, groups_of: Any) -> ChannelSettings:
    """Channel defaults over the configured names; the default team's approvers may change them."""
    from bot.channel_settings import ChannelSettings, ChannelSettingsStore, Choices, repository_names

    default = teams.default.team
    # Repository names: the repos section of the default team file (`repository_names` reads it).
    choices = Choices(repositories=repository_names(default), teams=tuple(teams.names()))
    approvals = default.approvals
    return ChannelSettings(
        ChannelSettingsStore(engine),
        call=call,
        groups_of=groups_of,
        choices=choices,
        approvers=approvals.approvers,
        approver_groups=approvals.approver_groups,
    )


def _start_retention(services: Services) -> None:
    """The scheduled prune of old event logs and workspaces (`MASSGEN_RETENTION_DAYS`, 0: never)."""
    from bot.engine.config import state_folder
    from bot.ops import retention_loop

    settings = services.settings
    if settings.retention_days <= 0:
        return
    sweep = retention_loop(
        services.storage.engine,
        older_than_days=settings.retention_days,
        workspaces=state_folder(settings) / "workspaces",  # where runs keep them (bot/engine)
        interval=settings.retention_interval,
        stop=services.stopping,
    )
    services.retention = asyncio.create_task(sweep, name="retention")


__all__ = [
    "OutboxOptions",
    "ReadyCheck",
    "Services",
    "Storage",
    "build_services",
    "identify",
    "make_client",
    "open_storage",
]
