"""The composition root: database, approval service + expiry scheduler, outbox, run supervisor, teams.

`build_services(settings)` is the only place that knows every layer; `Services.close()` drains
runs, stops the scheduler, flushes the outbox and disposes of the database, in that order.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Literal

from slack_sdk.http_retry.builtin_async_handlers import AsyncServerErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals.models import ApprovalRequest, Principal
from approvals.scheduler import ExpiryScheduler
from approvals.service import ApprovalService
from approvals.sql import SqlApprovalStore, SqlAuditLog, create_schema, make_engine
from bot.approvals_ui import ApprovalsUI, ThreadApprovalPort
from bot.groups import GroupResolver
from bot.listeners.home import publish_home
from bot.models import SharedModels
from bot.outbox import Outbox
from bot.runs import RunSupervisor, ToolsBuilder
from bot.settings import BotSettings, secret
from bot.store import BotStore
from bot.teams import TeamCatalog
from orchestrator.config import TeamConfig
from orchestrator.events import AnswerSubmitted, RunEvent
from orchestrator.llm.warmup import warm_up
from orchestrator.ports import RunContext, RunTools
from orchestrator.sql import SqlRunStore, create_run_schema
from orchestrator.store import RunStore

log = logging.getLogger(__name__)


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

    def scaled(self, factor: float) -> OutboxOptions:
        """The same budgets over `factor` times the time (0.02: a minute lasts 1.2 s)."""
        return replace(
            self,
            update_interval=self.update_interval * factor,
            channel_interval=self.channel_interval * factor,
            budget_window=self.budget_window * factor,
        )


@dataclass(slots=True, kw_only=True)
class Services:
    """Everything the listeners call; built once per process."""

    settings: BotSettings
    client: AsyncWebClient
    outbox: Outbox
    engine: AsyncEngine
    store: BotStore
    run_store: RunStore
    approvals: ApprovalService
    audit: SqlAuditLog
    approvals_ui: ApprovalsUI
    groups: GroupResolver
    scheduler: ExpiryScheduler
    runs: RunSupervisor
    models: SharedModels
    teams: TeamCatalog
    bot_token: str
    signing_secret: str
    identity: dict[str, str] = field(default_factory=dict)
    # Users who opened the Home tab: their Home is republished when an ask they may decide changes.
    home_viewers: set[str] = field(default_factory=set)
    clock: Callable[[], float] = time.time

    async def principal_for_run(self, user: str, team: TeamConfig) -> Principal:
        """The user with the team's approver groups they belong to (for Cancel / Finish now)."""
        groups: frozenset[str] = frozenset()
        if team.approvals.approver_groups and user not in team.approvals.approvers:
            groups = await self.groups.groups_of(user, team.approvals.approver_groups)
        return Principal(id=user, groups=groups)

    def refresh_homes(self, request: ApprovalRequest) -> None:
        """Republish the Home tab of listed approvers who use it (a views.publish each, Tier 4)."""
        for user in sorted(self.home_viewers & request.approvers.users):
            self.runs.spawn(publish_home(self, user), name=f"home:{user}")

    async def answer_text(self, run_id: str, label: str) -> str | None:
        """The full text of answer `label` of a run, from the run store."""
        for event in await self.run_store.events(run_id):
            if isinstance(event, AnswerSubmitted) and event.label == label:
                return event.content
        return None

    async def close(self, *, grace: float = 10.0) -> None:
        """Drain runs, stop timers, deliver queued Slack calls, release the database."""
        # Runs first: cancelling them cancels their asks, whose messages the UI still rewrites.
        await self.runs.drain(grace=grace)
        self.approvals_ui.detach()
        await self.models.aclose()
        await self.scheduler.stop()
        await self.outbox.close(drain=True, timeout=grace)
        await self.engine.dispose()


def make_client(settings: BotSettings) -> AsyncWebClient:
    """The Web API client every call goes through (`SLACK_API_URL` redirects it, Socket Mode included).

    Only 5xx retries are added: the outbox handles 429 itself (globally, honouring Retry-After), and
    a blind retry of `chat.postMessage` after a timeout could post twice.
    """
    client = AsyncWebClient(token=secret(settings.slack_bot_token) or None, base_url=settings.api_url())
    client.retry_handlers.append(AsyncServerErrorRetryHandler(max_retry_count=1))
    return client


def default_tools(workspace_root: Path | None = None) -> ToolsBuilder:
    """Real tools (files, shell in the sandbox, fetch) behind the permission gate.

    Agents' workspaces live under `workspace_root` (`MASSGEN_STATE_DIR/workspaces`), else in a
    temporary directory; each run's folder is removed when the run ends.
    """
    from orchestrator.toolbox import build_run_tools

    async def build(ctx: RunContext, port: ThreadApprovalPort) -> RunTools:
        tools: RunTools = await build_run_tools(ctx, approvals=port, root=workspace_root)
        return tools

    return build


async def recover(store: BotStore, approvals: ApprovalService, outbox: Outbox) -> int:
    """Runs a previous process left running cannot resume here: mark them failed, cancel their asks.

    Cancelling rewrites their approval messages (the UI finds them in the store), so nobody
    approves an action that no agent is waiting for any more.
    """
    stale = await store.running_runs()
    for run in stale:
        await store.finish_run(run.run_id, state="failed", final_answer=None)
        await approvals.cancel_run(run.run_id, reason="the bot restarted")
        if run.thread_ts:
            text = "⚠️ The bot restarted while this run was working; it was stopped. Start it again to retry."
            outbox.post(run.channel, text=text, thread=run.thread_ts)
    return len(stale)


def _tools(
    choice: ToolsBuilder | Literal["real", "none"], state_dir: Path | None = None
) -> ToolsBuilder | None:
    if choice == "real":
        return default_tools(None if state_dir is None else state_dir / "workspaces")
    return None if choice == "none" else choice


async def identify(client: AsyncWebClient, *, within: float = 3.0) -> dict[str, str]:
    """`auth.test` once at start-up, best effort: the bot's user id lets Bolt ignore its own events."""
    try:
        response = await asyncio.wait_for(client.auth_test(), within)
    except Exception as exc:  # a stand-in without auth.test, or no network yet: run without the ids
        log.warning("auth.test failed (%s); continuing without the bot's identity", exc)
        return {}
    return {k: str(response.get(k)) for k in ("user_id", "bot_id", "team_id") if response.get(k)}


@dataclass(frozen=True, slots=True)
class _Storage:
    engine: AsyncEngine
    store: BotStore
    run_store: SqlRunStore
    audit: SqlAuditLog
    approvals: ApprovalService


async def _open_storage(url: str) -> _Storage:
    """One engine for every table (approvals, audit, runs, the bot's own); schemas created if missing."""
    engine = make_engine(url)
    await create_schema(engine)
    await create_run_schema(engine)
    store = BotStore(engine)
    await store.create_schema()
    audit = SqlAuditLog(engine)
    approvals = ApprovalService(SqlApprovalStore(engine), audit)
    return _Storage(engine, store, SqlRunStore(engine), audit, approvals)


def _make_outbox(client: AsyncWebClient, options: OutboxOptions) -> Outbox:
    return Outbox(
        client,
        update_interval=options.update_interval,
        channel_interval=options.channel_interval,
        tier3_per_minute=options.tier3_per_minute,
        tier2_per_minute=options.tier2_per_minute,
        budget_window=options.budget_window,
    )


async def build_services(
    settings: BotSettings,
    *,
    team_file: Path | None = None,
    client: AsyncWebClient | None = None,
    tools: ToolsBuilder | Literal["real", "none"] = "real",
    outbox: OutboxOptions | None = None,
    clock: Callable[[], float] = time.time,
    observe: Callable[[str, RunEvent], None] | None = None,
) -> Services:
    """Wire every layer for one process. `tools="none"` runs agents with the workflow tools only."""
    teams = TeamCatalog.load(team_file or settings.team_file, settings.teams_dir)
    # Import the model SDKs and stream one canned turn through each, off the event loop: done lazily
    # by the first run, the imports and the SDKs' schema builds would stall acks and transactions.
    await asyncio.to_thread(warm_up, [a.backend.type for a in teams.default.team.agents])
    if settings.state_dir is not None:
        settings.state_dir.mkdir(parents=True, exist_ok=True)
    client = client or make_client(settings)
    box = _make_outbox(client, outbox or OutboxOptions())
    db = await _open_storage(settings.resolved_database_url())
    remind = timedelta(seconds=teams.default.team.approvals.remind_before_seconds)
    scheduler = ExpiryScheduler(db.approvals, remind_before=remind)
    models = SharedModels()
    models.prebuild(teams.default.team.agents)
    runs = RunSupervisor(
        outbox=box,
        store=db.store,
        approvals=db.approvals,
        run_store=db.run_store,
        tools=_tools(tools, settings.state_dir),
        clock=clock,
        observe=observe,
        broadcast_final=settings.broadcast_final,
        status_refresh=settings.status_refresh,
        models=models,
    )
    groups = GroupResolver(box.call, ttl=settings.group_cache_ttl)
    spawn = functools.partial(runs.spawn, name="approvals-ui")
    ui = ApprovalsUI(db.approvals, box, groups, db.store, spawn=spawn, clock=clock)
    ui.attach()
    await box.start()
    await recover(db.store, db.approvals, box)
    await scheduler.start()
    services = Services(
        settings=settings,
        client=client,
        outbox=box,
        engine=db.engine,
        store=db.store,
        run_store=db.run_store,
        approvals=db.approvals,
        audit=db.audit,
        approvals_ui=ui,
        groups=groups,
        scheduler=scheduler,
        runs=runs,
        models=models,
        teams=teams,
        bot_token=secret(settings.slack_bot_token),
        signing_secret=secret(settings.slack_signing_secret),
        identity=await identify(client),
        clock=clock,
    )
    ui.on_change = services.refresh_homes
    return services


__all__ = ["OutboxOptions", "Services", "build_services", "identify", "make_client"]
