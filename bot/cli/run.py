"""`massgen-bot run`: run a team on one task in the terminal, answering approvals at the prompt.

Exit codes: 0 done, 1 team-file or usage error, 2 run failed, 3 salvaged (timeout, budget,
max_rounds: an answer without consensus), 4 cancelled (Ctrl-C). Imports stay inside functions so
the first model request goes out quickly (`make bench` measures it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.settings import BotSettings
    from orchestrator import RunCancelled, RunFailed, RunFinished, TeamConfig

EXIT_DONE, EXIT_CONFIG, EXIT_FAILED, EXIT_SALVAGED, EXIT_CANCELLED = 0, 1, 2, 3, 4


def register(subparsers: Any) -> None:
    """Add the `run` subcommand."""
    parser = subparsers.add_parser("run", help="run a team of agents on a task in this terminal")
    parser.add_argument("task", nargs="+", help="what the agents should do")
    parser.add_argument(
        "--team", type=Path, default=None, help="team file (default: $MASSGEN_TEAM, else a built-in team)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print events as JSON lines on stdout, nothing else"
    )
    parser.add_argument(
        "--database-url",
        default=None,
        help="database for the run and its approvals (default $DATABASE_URL, else the bot's SQLite file)",
    )
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Load the team, run it, return the exit code."""
    import asyncio

    from bot.settings import BotSettings
    from orchestrator import TeamConfigError, default_team, load_team

    task = " ".join(args.task).strip()
    if not task:
        print("massgen-bot run: the task is empty", file=sys.stderr)
        return EXIT_CONFIG
    try:
        settings = BotSettings.load()
    except ValueError as exc:
        print(f"massgen-bot run: invalid settings: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.database_url is not None:
        settings = settings.model_copy(update={"database_url": args.database_url})
    team_file = args.team or settings.team_file
    try:
        team = load_team(team_file) if team_file is not None else default_team()
    except TeamConfigError as exc:
        print(f"massgen-bot run: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    for warning in team.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return asyncio.run(_main(args, settings, team, task))


def exit_code(terminal: RunFinished | RunFailed | RunCancelled) -> int:
    """The process exit code for a run's terminal event."""
    if terminal.kind == "cancelled":
        return EXIT_CANCELLED
    if terminal.kind == "failed":
        return EXIT_FAILED
    return EXIT_SALVAGED if terminal.salvage else EXIT_DONE


async def _main(args: argparse.Namespace, settings: BotSettings, team: TeamConfig, task: str) -> int:
    import asyncio
    import getpass
    import signal

    from bot.cli.run_view import JsonView, LiveView, TerminalApprover
    from orchestrator import sandbox_status, start_run

    # `sandbox: none` warns when its sandbox is made; a broken bubblewrap is said here, before any ask.
    if team.sandbox == "bwrap" and (problem := await sandbox_status("bwrap")) is not None:
        print(f"warning: {problem}", file=sys.stderr)
    user = f"cli:{getpass.getuser()}"
    team = _terminal_approver(team, user)
    from bot.wiring import open_storage

    # The same stores as the bot (`open_storage` is the composition root's storage half).
    storage = await open_storage(settings)
    service = storage.approvals
    view = JsonView() if args.json else LiveView()
    approver = TerminalApprover(service, user, view, interactive=sys.stdin.isatty())
    service.subscribe(approver.on_event)
    try:
        handle = await start_run(
            team,
            task,
            tools=_tools_factory(service),
            store=storage.run_store,
            requester=user,
            subscribers=[view.on_event],
        )
        loop = asyncio.get_running_loop()
        stopping: set[asyncio.Task[None]] = set()
        loop.add_signal_handler(signal.SIGINT, lambda: stopping.add(loop.create_task(handle.cancel(by=user))))
        view.start(handle)
        try:
            terminal = await handle.wait()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            await approver.close()
            await asyncio.gather(*stopping)
        view.finish(terminal)
        return exit_code(terminal)
    finally:
        await storage.close()


def _terminal_approver(team: TeamConfig, user: str) -> TeamConfig:
    """The person at the terminal approves their own run's asks (there is nobody else to ask)."""
    approvals = team.approvals.model_copy(
        update={"approvers": [*team.approvals.approvers, user], "allow_self_approval": True, "quorum": 1}
    )
    return team.model_copy(update={"approvals": approvals})


def _tools_factory(service: Any) -> Any:
    """`build_run_tools` bound to the approval service (the real tools, sandbox and permission gate)."""

    async def factory(ctx: Any) -> Any:
        from orchestrator import build_run_tools

        return await build_run_tools(ctx, approvals=service)

    return factory
