"""The playground: the real bot (same Bolt app, listeners, outbox, approvals, runs) on a local workspace.

`massgen-bot start` (`make run`) comes here when no Slack settings are set. One loopback server
holds the workspace: the Web API emulator at `/api/` (the bot's `SLACK_API_URL`) and the page at `/`.
The bot serves its usual `POST /slack/events` on another loopback port, and the workspace sends it
signed requests there, as Slack would. Nothing here ever talks to a real Slack.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import SecretStr

from bot.playground.emulator import SlackEmulator
from bot.playground.guide import Guide
from bot.playground.page import Page
from bot.playground.workspace import APPROVER, Workspace
from bot.settings import BotSettings

if TYPE_CHECKING:
    from bot.runs import ToolsBuilder
    from orchestrator import TeamConfig

log = logging.getLogger("massgen-bot")

DEFAULT_PORT = 8080
# The provider key each default-team backend needs; an agent whose key is set joins the playground team.
_KEYS = {"openai": "OPENAI_API_KEY", "claude": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True, slots=True)
class TeamPick:
    """The playground's team and why it was chosen (for the start-up log)."""

    team: TeamConfig
    why: str


def playground_team(env: Mapping[str, str], team_file: Path | None = None) -> TeamPick:
    """`team_file` if given; else the default team's agents whose provider key is set; else three local
    agents."""
    from orchestrator import TeamConfig, default_team, load_team, local_team

    if team_file is not None:
        team, why = load_team(team_file), f"the team file {team_file}"
    else:
        keyed = [a for a in default_team(env).agents if env.get(_KEYS.get(a.backend.type, ""), "").strip()]
        if keyed:
            team = TeamConfig(agents=keyed)
            why = "provider keys are set: " + ", ".join(f"{a.id} ({a.backend.model})" for a in keyed)
        else:
            team, why = local_team(), "no provider keys: three local agents on the embedded model"
    return TeamPick(team=team, why=why)


def with_approver(team: TeamConfig) -> TeamConfig:
    """The team with the playground's approver among its approvers (the bot's approver)."""
    approvals = team.approvals
    if APPROVER.id in approvals.approvers:
        return team
    approvals = approvals.model_copy(update={"approvers": [*approvals.approvers, APPROVER.id]})
    return team.model_copy(update={"approvals": approvals})


def playground_settings(
    settings: BotSettings, *, api_url: str, state_dir: Path, token: str, signing_secret: str
) -> BotSettings:
    """The bot's settings pointed at the local workspace, with its credentials and a fresh database."""
    values: dict[str, Any] = {
        "slack_bot_token": SecretStr(token),
        "slack_signing_secret": SecretStr(signing_secret),
        "slack_app_token": None,
        "slack_api_url": api_url,
        "slack_allowed_team_ids": "",
        "host": "127.0.0.1",
        "database_url": f"sqlite:///{(state_dir / 'massgen.db').as_posix()}",
        "state_dir": state_dir,
    }
    return settings.model_copy(update=values)


def fresh_state_dir(settings: BotSettings) -> Path:
    """`<state dir>/playground`, emptied: the workspace lives in memory, so yesterday's runs and outbox
    rows would point at messages that no longer exist."""
    root = settings.state_dir if settings.state_dir is not None else Path(".massgen")
    path = root / "playground"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    return path


def with_demo_repository(team: TeamConfig, stack: contextlib.AsyncExitStack, state_dir: Path) -> TeamConfig:
    """The team with a `demo` repository: a local bare remote and the GitHub stand-in (no account)."""
    from bot.playground.forge import DEMO_PROJECT, DEMO_TOKEN_ENV, ForgeStandIn, demo_remote
    from orchestrator.config.repos import RepoCredentials, RepositoryConfig

    if any(r.name == "demo" for r in team.repositories):
        return team
    remote = demo_remote(state_dir / "forge")
    token = os.environ.setdefault(DEMO_TOKEN_ENV, secrets.token_hex(8))  # this process's stand-in only
    forge = stack.enter_context(ForgeStandIn({DEMO_PROJECT: remote}, token=token))
    demo = RepositoryConfig(
        name="demo",
        url=f"file://{remote}",
        api_url=forge.url,
        project=DEMO_PROJECT,
        credentials=RepoCredentials(token_env=DEMO_TOKEN_ENV),
    )
    log.info("repository demo: %s, pull requests on %s", remote, forge.url)
    return team.model_copy(update={"repositories": [*team.repositories, demo]})


@dataclass(slots=True)
class Playground:
    """A running playground: the workspace server's URL and the bot's endpoint."""

    slack: SlackEmulator
    workspace: Workspace
    url: str


async def serve_playground(
    settings: BotSettings,
    *,
    port: int = DEFAULT_PORT,
    team: TeamPick | None = None,
    env: Mapping[str, str] | None = None,
    team_file: Path | None = None,
    ready: asyncio.Event | None = None,
    started: list[Playground] | None = None,
    stop: asyncio.Event,
    tools: ToolsBuilder | Literal["real", "none"] = "real",
) -> int:
    """Serve the playground until `stop` is set; `started` receives it once the page answers."""
    from aiohttp import web

    from bot.app import build_app, build_web_app
    from bot.wiring import build_services
    from orchestrator import TeamConfigError
    from orchestrator.llm.factory import missing_model_files

    try:
        pick = team or playground_team(os.environ if env is None else env, team_file)
    except TeamConfigError as exc:
        log.error("playground: %s", exc)
        return 1
    if missing := missing_model_files(pick.team):  # before the page opens, not at the first run
        log.error("playground: %s", "; ".join(f"agent {agent}: {why}" for agent, why in missing.items()))
        return 1
    token, signing_secret = f"xoxb-playground-{secrets.token_hex(8)}", secrets.token_hex(16)
    slack = SlackEmulator(bot_token=token)
    workspace = Workspace(slack=slack, signing_secret=signing_secret)
    guide = Guide(team=pick.team)
    state_dir = fresh_state_dir(settings)
    async with contextlib.AsyncExitStack() as stack:
        try:
            await slack.start(port=port, routes=Page(workspace, guide).routes)
        except OSError as exc:  # asyncio's message repeats the address around the OS's reason
            reason = str(exc).rpartition(": ")[2] or type(exc).__name__
            log.error(
                "playground: cannot listen on 127.0.0.1:%s (%s); choose another with --playground-port "
                "or MASSGEN_PLAYGROUND_PORT",
                port,
                reason,
            )
            return 1
        stack.push_async_callback(slack.close)
        stack.push_async_callback(workspace.close)
        local = playground_settings(
            settings, api_url=slack.api_url, state_dir=state_dir, token=token, signing_secret=signing_secret
        )
        chosen = with_demo_repository(with_approver(pick.team), stack, state_dir)
        try:
            services = await build_services(local, team=chosen, tools=tools)
        except TeamConfigError as exc:
            log.error("playground: %s", exc)
            return 1
        stack.push_async_callback(services.close)
        guide.runs = services.run_store
        runner = web.AppRunner(build_web_app(build_app(services), services), access_log=None)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        workspace.bot_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
        url = f"http://127.0.0.1:{slack.port}"
        log.info("mode: playground (no Slack settings, so a local workspace; it never talks to Slack)")
        log.info("team: %s", pick.why)
        log.info("open %s in a browser (people: requester, approver, someone else)", url)
        if started is not None:
            started.append(Playground(slack=slack, workspace=workspace, url=url))
        if ready is not None:
            ready.set()
        await stop.wait()
        log.info("shutting down: draining runs")
    return 0
