"""`massgen-bot serve` (HTTP), `socket` (Socket Mode), `playground`, `start` (`make run`) and `worker`.

`start` picks the mode: Socket Mode when its tokens are set, else HTTP when its are, else the
playground (a local workspace in the browser; `bot/playground/`). Each Slack mode takes
`--role all|frontend|worker` (default `$MASSGEN_ROLE`, else `all`: one process does everything). A
front end takes Slack's requests and enqueues runs; a worker executes them and serves only
`/healthz` and `/readyz`; `worker` is `start --role=worker`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from bot.cli.starting import Starting
from bot.settings import BotSettings, Mode, Role, missing_settings_help, secret, settings_problem

log = logging.getLogger("massgen-bot")

Serving = Mode | Literal["worker"]  # what a process listens to: Slack (HTTP or Socket Mode), or nothing


class CannotListen(Exception):
    """The HTTP port cannot be bound (in use, or not this user's to take): one line, exit 1."""


def register(subparsers: Any) -> None:
    """Add the three serving subcommands."""
    serve = subparsers.add_parser("serve", help="serve Slack over HTTP (POST /slack/events, GET /healthz)")
    serve.add_argument(
        "--port", type=int, default=None, help="port to bind on 0.0.0.0 (default $PORT or 3000)"
    )
    _common(serve)
    serve.set_defaults(func=lambda args: _main(args, "http"))
    socket = subparsers.add_parser("socket", help="connect to Slack over Socket Mode (needs SLACK_APP_TOKEN)")
    _common(socket)
    socket.set_defaults(func=lambda args: _main(args, "socket"))
    playground = subparsers.add_parser(
        "playground", help="the bot on a local workspace in the browser (no Slack, no accounts)"
    )
    _playground_port(playground)
    _common(playground)
    playground.set_defaults(func=lambda args: _main(args, "playground"))
    start = subparsers.add_parser(
        "start",
        help="Socket Mode when its tokens are set, else HTTP, else the playground (what `make run` does)",
    )
    start.add_argument("--port", type=int, default=None, help="HTTP port when serving over HTTP")
    _playground_port(start)
    _common(start)
    start.set_defaults(func=lambda args: _main(args, None))
    worker = subparsers.add_parser(
        "worker", help="execute runs only (no Slack ingress; /healthz and /readyz on $PORT)"
    )
    worker.add_argument("--port", type=int, default=None, help="health-check port (default $PORT or 3000)")
    _common(worker, role=False)
    worker.set_defaults(func=lambda args: _main(args, None, role="worker"))


def _playground_port(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--playground-port",
        type=int,
        default=None,
        help="the playground page's port on 127.0.0.1 (default $MASSGEN_PLAYGROUND_PORT or 8080)",
    )


def _common(parser: argparse.ArgumentParser, *, role: bool = True) -> None:
    parser.add_argument(
        "--team", type=Path, default=None, help="team file (default: $MASSGEN_TEAM or built-in)"
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    if role:
        parser.add_argument(
            "--role",
            choices=["all", "frontend", "worker"],
            default=None,
            help="all: one process does everything (default $MASSGEN_ROLE or all); frontend: Slack "
            "ingress, enqueues runs; worker: executes runs",
        )


def _main(
    args: argparse.Namespace, mode: Mode | Literal["playground"] | None, *, role: Role | None = None
) -> int:
    try:
        settings = BotSettings.load()
    except ValueError as exc:  # one line: which variable, and what is wrong with it
        problem = settings_problem(exc) if isinstance(exc, ValidationError) else str(exc)
        print(f"massgen-bot: invalid settings: {problem}", file=sys.stderr)
        return 1
    from bot.cli.preflight import state_folder_problem
    from bot.ops import configure_logging

    if (unwritable := state_folder_problem(settings)) is not None:
        print(f"massgen-bot: {unwritable}", file=sys.stderr)
        return 1

    tokens = (settings.slack_bot_token, settings.slack_app_token, settings.slack_signing_secret)
    if mode != "playground" and (placeholders := placeholder_settings(settings)):
        print(
            f"massgen-bot: {', '.join(placeholders)} still hold the placeholders from .env.example: "
            "put your Slack app's values in .env, or remove these lines to use the playground",
            file=sys.stderr,
        )
        return 1
    configure_logging(args.log_level, fmt=settings.log_format, secrets=[secret(t) for t in tokens])
    role = role or getattr(args, "role", None)
    if role is not None:
        settings = settings.model_copy(update={"role": role})
    chosen: Serving
    if settings.role == "worker":
        chosen = "worker"  # no Slack ingress: health checks only
        if not secret(settings.slack_bot_token):
            print("massgen-bot worker: SLACK_BOT_TOKEN is needed to post runs' messages", file=sys.stderr)
            return 1
    else:
        # No Slack settings: the playground, unless this process was asked to be a front end.
        picked = mode or settings.start_mode() or ("playground" if settings.role == "all" else None)
        if picked == "playground":
            return _playground(args, settings.model_copy(update={"role": "all"}))
        if picked is None or settings.missing(picked):
            print(missing_settings_help(settings), file=sys.stderr)
            return 1
        chosen = picked
        log.info("mode: Slack over %s", "Socket Mode" if picked == "socket" else "HTTP")
    port = getattr(args, "port", None)
    port = settings.port if port is None else port
    if not 0 <= port <= 65535:
        print(f"massgen-bot: the port must be 0-65535, not {port}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(
            serve(settings, mode=chosen, team_file=args.team, port=port, freeze_gc=True, hard_exit=True)
        )
    except KeyboardInterrupt:
        return 0


# The values `.env.example` ships: copied unchanged they select a Slack mode that can never connect.
_PLACEHOLDER = re.compile(r"x{8,}|^0{16,}$|your-", re.IGNORECASE)


def placeholder_settings(settings: BotSettings) -> list[str]:
    """Names of the Slack settings that still hold `.env.example`'s placeholder values."""
    values = {
        "SLACK_BOT_TOKEN": settings.slack_bot_token,
        "SLACK_APP_TOKEN": settings.slack_app_token,
        "SLACK_SIGNING_SECRET": settings.slack_signing_secret,
    }
    return [name for name, value in values.items() if _PLACEHOLDER.search(secret(value))]


def _playground(args: argparse.Namespace, settings: BotSettings) -> int:
    from bot.playground import serve_playground

    port = settings.playground_port if args.playground_port is None else args.playground_port
    if not 0 <= port <= 65535:
        print(f"massgen-bot: the playground port must be 0-65535, not {port}", file=sys.stderr)
        return 1

    async def main() -> int:
        stop = _stop_on_signals()
        return await serve_playground(
            settings, port=port, team_file=args.team or settings.team_file, stop=stop
        )

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 0


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop


async def serve(
    settings: BotSettings,
    *,
    mode: Serving,
    team_file: Path | None = None,
    port: int | None = None,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    freeze_gc: bool = False,
    hard_exit: bool = False,
) -> int:
    """Run until SIGINT/SIGTERM (or `stop`), then stop taking work, drain short runs, close everything.

    `mode="worker"` serves no Slack ingress, only health checks. `freeze_gc` and `hard_exit` are
    for a process that serves for its whole life (the CLI), not for tests: with `hard_exit`, runs
    still going after the grace period are left exactly as they are (the process exits without
    unwinding them, which would record their end), pending in the engine, to resume elsewhere or
    at the next start.
    """
    if stop is None:
        stop = _stop_on_signals()  # before anything that can wait: a signal stops every state
    if freeze_gc:
        # Start-up makes objects that live as long as the process (SDK modules imported, schemas
        # built): collecting them meanwhile is wasted work, about an eighth of the SDKs' import.
        gc.disable()
    port = settings.port if port is None else port
    # The port answers from now on (alive; 503 "starting: …" until the process serves), so a
    # probe tells a process that is starting from one that hangs.
    starting = Starting()
    try:
        early = await _bind_starting(starting, settings.host, port)
    except CannotListen as exc:
        print(f"massgen-bot: {exc}", file=sys.stderr)
        return 1
    try:
        services = await _services(settings, team_file, starting)
    except BaseException:
        await early.cleanup()
        raise
    if services is None:
        await early.cleanup()
        return 1
    async with contextlib.AsyncExitStack() as stack:
        # Unwound in reverse: stop taking requests first, then drain runs and close the services.
        stack.push_async_callback(services.close, grace=settings.shutdown_grace)
        stack.push_async_callback(early.cleanup)
        app = None if mode == "worker" else _slack_app(services)
        if freeze_gc:
            # Start-up objects (SDK types, schemas, listeners) live as long as the process: move them
            # out of the collector's view so a full collection cannot stall an ack for ~100 ms.
            gc.collect()
            gc.freeze()
            gc.enable()
        # Connecting may never succeed (Socket Mode retries an unreachable Slack for ever): a stop
        # signal ends the wait whatever the state.
        listening = asyncio.ensure_future(_listen(stack, app, services, mode, starting, settings, port))
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({listening, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if listening.done():
            listening.result()
            if ready is not None:
                ready.set()
            await stopping
        else:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening
            log.info("stopped before the connection to Slack was made")
        log.info("shutting down: no new runs; draining short ones")
    if hard_exit and services.left_running:
        log.info("%d run(s) left pending in the engine; they resume on restart", services.left_running)
        logging.shutdown()
        os._exit(0)
    return 0


async def _services(settings: BotSettings, team_file: Path | None, starting: Starting) -> Any:
    """The built services, or None once the reason they cannot be built is printed."""
    from sqlalchemy.exc import SQLAlchemyError

    from approvals import ApprovalsError
    from bot.wiring import build_services
    from orchestrator import TeamConfigError

    try:
        starting.enter("loading the team")
        if (problem := _team_file_problem(team_file or settings.team_file)) is not None:
            print(f"massgen-bot: {problem}", file=sys.stderr)
            return None
        return await build_services(settings, team_file=team_file, progress=starting.enter)
    except TeamConfigError as exc:
        print(f"massgen-bot: {exc}", file=sys.stderr)
    except (OSError, ApprovalsError, SQLAlchemyError) as exc:  # the database: a bad URL, unreachable
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"massgen-bot: cannot open the database (DATABASE_URL): {first}", file=sys.stderr)
    return None


def _slack_app(services: Any) -> Any:
    """The Bolt app with every listener (a worker has none: it never loads the Slack SDK's app)."""
    from bot.app import build_app

    return build_app(services)


def _team_file_problem(team_file: Path | None) -> str | None:
    """A team file's local agents whose model files are missing (before the services start, not at a run)."""
    if team_file is None:
        return None
    from bot.cli.preflight import model_files_problem
    from orchestrator import load_team

    problem = model_files_problem(load_team(team_file))  # a bad file raises `TeamConfigError`
    return None if problem is None else f"{problem} (the team file {team_file})"


async def _listen(
    stack: contextlib.AsyncExitStack,
    app: Any,
    services: Any,
    mode: Serving,
    starting: Starting,
    settings: BotSettings,
    port: int,
) -> None:
    """Connect to Slack if this mode does, then serve: the port's requests go to the real app."""
    from bot.app import build_health_app, build_web_app

    if mode == "http":
        starting.serve(build_web_app(app, services))
        log.info("serving Slack over HTTP on %s:%s/slack/events", settings.host, port)
        return
    if mode != "worker":
        starting.enter("connecting to Slack")
        await _listen_socket(stack, app, secret(settings.slack_app_token))
    # Health checks (Docker, Kubernetes) need HTTP in Socket Mode too: /healthz and /readyz only.
    starting.serve(build_health_app(services))
    log.info("health checks on %s:%s/healthz and /readyz", settings.host, port)


async def _bind_starting(starting: Starting, host: str, port: int) -> Any:
    """The port bound to `starting`'s application; its runner (cleaned up once, at the end)."""
    from aiohttp import web

    runner = web.AppRunner(starting.application(), access_log=None)
    await runner.setup()
    try:
        await _bind(web.TCPSite(runner, host, port), host, port)
    except CannotListen:
        await runner.cleanup()
        raise
    return runner


async def _bind(site: Any, host: str, port: int) -> None:
    """Start `site`; a port that cannot be bound is a `CannotListen` naming it and how to choose another."""
    try:
        await site.start()
    except OSError as exc:
        # asyncio's message repeats the address around the OS's reason: the reason alone is the news.
        reason = str(exc).rpartition(": ")[2] or exc.strerror or type(exc).__name__
        advice = "choose another with --port or PORT"
        raise CannotListen(f"cannot listen on {host}:{port} ({reason}); {advice}") from None


async def _listen_socket(stack: contextlib.AsyncExitStack, app: Any, app_token: str) -> None:
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    handler: Any = AsyncSocketModeHandler(app, app_token=app_token)  # untyped in slack_bolt
    # The SDK retries a failed connection for ever and logs each failure with its whole traceback
    # (eighty lines a try while Slack is unreachable): one line a try says the same.
    app.logger.addFilter(_one_line_connect_failures)
    stack.push_async_callback(handler.close_async)  # also ends a connection still being retried
    await handler.connect_async()
    log.info("connected to Slack over Socket Mode")


def _one_line_connect_failures(record: logging.LogRecord) -> bool:
    """Socket Mode's "Failed to connect …; Retrying..." without its traceback (the error is in it)."""
    if record.getMessage().startswith("Failed to connect"):
        record.exc_info, record.exc_text, record.stack_info = None, None, None
    return True
