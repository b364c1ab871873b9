"""`massgen-bot run`: run a team on one task in the terminal, answering approvals at the prompt.

The run goes as in the bot: in park mode, through `orchestrator.RunDriver`. An ask opens an
approval request and the run parks once nothing can progress without it; the prompt here (or
`massgen-bot approvals approve` in another terminal, or the file handshake) decides, and the
decision resumes the run by id. Everything is in the database, so a run interrupted (Ctrl-C) or
killed goes on with `massgen-bot run --resume RUN_ID`: completed model calls are not made again,
an approved action runs once, and a pending approval is asked again at the prompt; `--cancel
RUN_ID` ends such a run instead. One process at a time drives a run: each of these holds the run's
lease (`RunStore.lease`) while it acts, and another asking for the same run is refused at once.

With `MASSGEN_PROVIDER_LIMITS` set, this process's model requests stay under each limit by
themselves (`orchestrator.LocalLimits`, no engine): the limit is this one process's, not shared
with a bot fleet running at the same time (its workers hold theirs on their engine's queues).

Exit codes: 0 done, 1 config or usage error (before the run starts; a run another process drives),
2 run failed, 3 salvaged (timeout, budget, max_rounds: an answer without consensus), 4 cancelled,
5 interrupted (Ctrl-C, or the lease taken away: the run is kept for `--resume`). Imports stay
inside functions so the first model request goes out quickly (`make bench` measures it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from concurrent.futures import Future

    from bot.settings import BotSettings
    from bot.wiring import Storage
    from orchestrator import ModelFactory, RunCancelled, RunFailed, RunFinished, RunLease, TeamConfig

EXIT_DONE, EXIT_CONFIG, EXIT_FAILED, EXIT_SALVAGED, EXIT_CANCELLED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 5
ENV_FILE = ".env"


class UsageError(Exception):
    """A problem the user can fix before the run starts (exit 1, one line on stderr)."""


def register(subparsers: Any) -> None:
    """Add the `run` subcommand."""
    parser = subparsers.add_parser("run", help="run a team of agents on a task in this terminal")
    parser.add_argument("task", nargs="*", help="what the agents should do (`-`: read it from stdin)")
    parser.add_argument(
        "--task-file", type=Path, default=None, metavar="FILE", help="read the task from FILE (`-`: stdin)"
    )
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
    parser.add_argument(
        "--repo",
        default=None,
        metavar="NAME",
        help="work on the team file's repository NAME (`repositories:`); the result is a pull request",
    )
    stored = parser.add_mutually_exclusive_group()
    stored.add_argument(
        "--resume",
        default=None,
        metavar="RUN_ID",
        help="continue a run that was interrupted or killed (no task; the same --team and database)",
    )
    stored.add_argument(
        "--cancel",
        default=None,
        metavar="RUN_ID",
        help="end a run that was interrupted or killed, without resuming it (its asks are cancelled)",
    )
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Load the settings, the team and the task; check the keys; run; return the exit code."""
    import asyncio
    import gc

    # Start-up is imports (ours, SQLAlchemy, the SDKs': thousands of classes) that make little
    # garbage but trigger many collections; the collector is back once the SDKs have loaded.
    gc.disable()
    try:
        from bot.settings import load_env_file

        load_env_file(ENV_FILE)
        stored = args.resume is not None or args.cancel is not None
        task = None if stored else read_task(args.task, args.task_file)
        if stored and (args.task or args.task_file is not None or args.repo is not None):
            raise UsageError("--resume and --cancel act on a stored run: give no task (nor --repo)")
        settings = _settings(args.database_url)
        # --cancel calls no model: it needs no API key, nor the model files.
        team, team_name = _team(args.team or settings.team_file, models=args.cancel is None)
        _check_state_folder(settings)  # last: it makes the folder, and a refused run leaves nothing
    except UsageError as exc:
        print(f"massgen-bot run: {exc}", file=sys.stderr)
        gc.enable()
        return EXIT_CONFIG
    # The SDK imports (the longest part of a start-up) start now, and overlap with everything below.
    from orchestrator import after_sdk_loads, preload_sdks

    preload_sdks(agent.backend.type for agent in team.agents)
    after_sdk_loads(gc.enable)
    warming = _warm_up_if_limited(settings, team)
    for warning in team.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return asyncio.run(_main(args, settings, team, task, team_name, warming))


def read_task(words: list[str], task_file: Path | None) -> str:
    """The task from the words, `-` (stdin) or `--task-file`; never empty."""
    if task_file is not None and words:
        raise UsageError("give the task as words or as --task-file, not both")
    source = str(task_file) if task_file is not None else ("-" if words == ["-"] else None)
    if source == "-":
        text = sys.stdin.read()
    elif source is not None:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the task file {source}: {exc}") from None
    else:
        text = " ".join(words)
    if not text.strip():
        raise UsageError("the task is empty")
    return text.strip()


def _settings(database_url: str | None) -> BotSettings:
    from bot.settings import BotSettings

    try:
        settings = BotSettings.load(env_file=None)  # `.env` is in the environment already
    except ValueError as exc:
        raise UsageError(f"invalid settings: {exc}") from None
    if database_url is not None:
        settings = settings.model_copy(update={"database_url": database_url})
    return settings


def _check_state_folder(settings: BotSettings) -> None:
    from bot.cli.preflight import state_folder_problem

    if (problem := state_folder_problem(settings)) is not None:
        raise UsageError(problem)


def _team(team_file: Path | None, *, models: bool = True) -> tuple[TeamConfig, str]:
    """The team (its file, else the built-in one) and its name; with `models` (the run will call
    them), once every agent has its key and every local agent its model file."""
    from bot.cli.preflight import model_files_problem
    from orchestrator import TeamConfigError, default_team, load_team, missing_keys

    try:
        team = load_team(team_file) if team_file is not None else default_team()
    except TeamConfigError as exc:
        raise UsageError(str(exc)) from None
    if models and (problem := model_files_problem(team)) is not None:
        raise UsageError(f"{problem} (the team file {team_file})")  # the built-in team has no local agent
    missing = missing_keys(team, os.environ) if models else {}
    if missing:
        agents = ", ".join(f"agent {agent} needs {var}" for agent, var in missing.items())
        where = f"the team file {team_file}" if team_file is not None else "a team file (--team)"
        raise UsageError(
            f"no API key: {agents}; set it in the environment or {ENV_FILE}, or api_key in {where}"
        )
    return team, team_file.stem if team_file is not None else "default"  # as the bot names its teams


def exit_code(terminal: RunFinished | RunFailed | RunCancelled) -> int:
    """The process exit code for a run's terminal event."""
    if terminal.kind == "cancelled":
        return EXIT_CANCELLED
    if terminal.kind == "failed":
        return EXIT_FAILED
    return EXIT_SALVAGED if terminal.salvage else EXIT_DONE


def redact_url(url: str) -> str:
    """A database URL fit to print: its password replaced by `***`."""
    return re.sub(r"(://[^/:@]*:)[^/@]*@", r"\1***@", url)


async def _open_storage(settings: BotSettings) -> Storage:
    """The bot's stores; any failure is one line naming the database (its password hidden)."""
    from bot.wiring import open_storage

    try:
        return await open_storage(settings)
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server, an unwritable file
        detail = " ".join(str(exc).split()) or type(exc).__name__
        url = redact_url(settings.resolved_database_url())
        raise UsageError(f"cannot open the database {url}: {detail[:300]}") from None


async def _main(
    args: argparse.Namespace,
    settings: BotSettings,
    team: TeamConfig,
    task: str | None,
    team_name: str,
    warming: Future[object] | None,
) -> int:
    import getpass
    import secrets

    from orchestrator import sandbox_status

    # `sandbox: none` warns when its sandbox is made; a broken bubblewrap is said here, before any ask.
    if team.sandbox == "bwrap" and (problem := await sandbox_status("bwrap")) is not None:
        print(f"warning: {problem}", file=sys.stderr)
    user = f"cli:{getpass.getuser()}"
    try:
        storage = await _open_storage(settings)
    except UsageError as exc:
        print(f"massgen-bot run: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        workspaces = _workspace_root(settings)
        run_id = args.cancel or args.resume or f"run-{secrets.token_hex(6)}"
        team = await _repository(args, settings, team, run_id, workspaces)
        async with _lease(storage, run_id) as lease:  # this process alone drives the run until it returns
            if args.cancel is not None:
                return await _cancel(args, storage, _terminal_approver(team, user), user, workspaces)
            approving = _terminal_approver(team, user)
            models = await _models(settings, warming)
            held = (run_id, lease)
            return await _run(args, storage, approving, task, team_name, user, workspaces, models, held)
    except UsageError as exc:
        print(f"massgen-bot run: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    finally:
        await storage.close()


async def _run(
    args: argparse.Namespace,
    storage: Storage,
    team: TeamConfig,
    task: str | None,
    team_name: str,
    user: str,
    workspaces: Path,
    models: ModelFactory | None,
    held: tuple[str, RunLease],
) -> int:
    import asyncio
    import signal

    from bot.cli.run_view import JsonView, LiveView, TerminalApprover
    from orchestrator import RunDriver, RunHandle, RunNotResumable

    run_id, lease = held
    service = storage.approvals
    view = JsonView() if args.json else LiveView()
    if args.resume is not None:  # before anything runs: a run that cannot go on is one line, exit 1
        view.replay(await _resumable(storage, run_id))
    # The task read from stdin used it up: nobody is left to answer there, so asks are denied.
    interactive = sys.stdin.isatty() and not _task_from_stdin(args)
    approver = TerminalApprover(service, user, view, interactive=interactive)
    service.subscribe(approver.on_event)
    started: list[RunHandle] = []

    def on_handle(handle: RunHandle) -> None:  # each segment of the run (it parks and resumes)
        if not started:
            view.start(handle)
        started.append(handle)

    driver = RunDriver(
        team,
        approvals=service,
        store=storage.run_store,
        models=models,
        tools=_tools_factory(service, workspaces),
        subscribers=[view.on_event],
        on_handle=on_handle,
    )
    print(f"run {run_id} (later: massgen-bot audit --run {run_id})", file=sys.stderr)
    if args.resume is not None:
        driving = asyncio.ensure_future(driver.resume(run_id))
        approver.ask(await service.pending(run_id=run_id))  # asked before the restart, still open
    else:
        driving = asyncio.ensure_future(
            driver.start(task or "", run_id=run_id, requester=user, team_name=team_name)
        )
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, interrupted.set)
    stop = asyncio.ensure_future(interrupted.wait())
    lost = asyncio.ensure_future(lease.lost())
    try:
        await asyncio.wait({driving, stop, lost}, return_when=asyncio.FIRST_COMPLETED)
        if not driving.done():  # Ctrl-C, or another process may take the run now: stop driving it here
            _interrupted(args, view, run_id, lost.result() if lost.done() else None)
        terminal = driving.result()
    except RunNotResumable as exc:  # e.g. `--resume` with another team than the run was started with
        raise UsageError(f"cannot resume: {exc}") from None
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        stop.cancel()
        lost.cancel()
        await approver.close()
    view.finish(terminal)
    _print_pull_request(args, terminal)
    return exit_code(terminal)


async def _repository(
    args: argparse.Namespace, settings: BotSettings, team: TeamConfig, run_id: str, workspaces: Path
) -> TeamConfig:
    """`--repo NAME`: the mirror fetched and the team bound to it (a stored run: as it was bound)."""
    import asyncio

    from bot.cli import repo
    from bot.engine.config import state_folder

    stored = args.resume is not None or args.cancel is not None
    bind = partial(repo.for_run, team, args.repo, run_id, stored=stored)
    try:
        return await asyncio.to_thread(bind, state=state_folder(settings), root=workspaces)
    except repo.RepoUsageError as exc:
        raise UsageError(str(exc)) from None


def _print_pull_request(args: argparse.Namespace, terminal: Any) -> None:
    from bot.cli.repo import pull_request_line

    line = pull_request_line(terminal)
    if line is not None:
        print(line, file=sys.stderr if args.json else sys.stdout)


async def _cancel(
    args: argparse.Namespace, storage: Storage, team: TeamConfig, user: str, workspaces: Path
) -> int:
    """`--cancel RUN_ID`: end a stored run that is not running, as a Cancel would (exit 4)."""
    from bot.cli.run_view import JsonView, LiveView
    from orchestrator import RunNotResumable, stop_parked_run

    view = JsonView() if args.json else LiveView()
    view.replay(await _resumable(storage, args.cancel, "cancel"))
    try:
        terminal = await stop_parked_run(
            args.cancel,
            team,
            storage.run_store,
            "cancel",
            by=user,
            tools=_tools_factory(storage.approvals, workspaces),
            subscribers=[view.on_event],
        )
    except RunNotResumable as exc:
        raise UsageError(f"cannot cancel: {exc}") from None
    view.finish(terminal)
    return exit_code(terminal)


@contextlib.asynccontextmanager
async def _lease(storage: Storage, run_id: str) -> AsyncIterator[RunLease]:
    """The run's lease for this process (it ends with the process, `kill -9` included); else one line."""
    from orchestrator import RunBusy

    held = contextlib.AsyncExitStack()
    try:
        lease = await held.enter_async_context(storage.run_store.lease(run_id))
    except RunBusy as exc:
        advice = "wait for it to end, or stop it there (Ctrl-C keeps the run) and try again"
        raise UsageError(f"{exc}; {advice}") from None
    async with held:
        yield lease


async def _resumable(storage: Storage, run_id: str, verb: str = "resume") -> list[Any]:
    """The stored events of a run that has not ended and is this CLI's; else a `UsageError` saying why not."""
    from orchestrator import TERMINAL_KINDS

    events = await storage.run_store.events(run_id)
    if not events:
        raise UsageError(f"no run {run_id} in this database")
    if events[-1].kind in TERMINAL_KINDS:
        raise UsageError(f"run {run_id} already ended ({events[-1].kind}); nothing to {verb}")
    summary = await storage.run_store.get(run_id)
    if summary is not None and summary.conversation is not None:  # the bot's engine drives it
        where = summary.conversation.surface
        raise UsageError(f"run {run_id} belongs to {where} (the bot drives it); {verb} it there, not here")
    return list(events)


def _interrupted(args: argparse.Namespace, view: Any, run_id: str, lost: str | None = None) -> None:
    """Ctrl-C or a lost lease: leave the run as a kill would (it is all in the database), say how to go on."""
    view.pause()
    team = f" --team {args.team}" if args.team is not None else ""
    same_db = " (with the same --database-url)" if args.database_url is not None else ""
    why = "interrupted" if lost is None else f"stopped (lease lost, another process may take the run: {lost})"
    print(
        f"{why}: run {run_id} is kept; continue it with `massgen-bot run --resume {run_id}{team}`"
        f"{same_db}, or end it with `massgen-bot run --cancel {run_id}{team}`",
        file=sys.stderr,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    # No cancellation: cancelling the run's tasks would end it (RunCancelled) instead of keeping it.
    os._exit(EXIT_INTERRUPTED)


def _workspace_root(settings: BotSettings) -> Path:
    """Where the agents' workspaces live: under the state folder, so a resumed run finds them."""
    from bot.engine.config import state_folder

    return state_folder(settings) / "workspaces"


def _task_from_stdin(args: argparse.Namespace) -> bool:
    return args.task == ["-"] or str(args.task_file) == "-"


def _terminal_approver(team: TeamConfig, user: str) -> TeamConfig:
    """The person at the terminal approves their own run's asks (there is nobody else to ask)."""
    approvals = team.approvals.model_copy(
        update={"approvers": [*team.approvals.approvers, user], "allow_self_approval": True, "quorum": 1}
    )
    return team.model_copy(update={"approvals": approvals})


def _warm_up_if_limited(settings: BotSettings, team: TeamConfig) -> Future[object] | None:
    """Under limits, the SDKs' first-call costs are paid before the run, as the bot pays them at boot.

    A first request slowed by them (a few hundred ms of schema building on the event loop) would
    reach the provider well after its admission, past the margin its window allows (see
    `orchestrator.LocalLimits`). In the loader thread, after the imports: it overlaps the start-up.
    """
    if not settings.limits():
        return None
    import functools

    from orchestrator import after_sdk_loads, warm_up

    return after_sdk_loads(functools.partial(warm_up, [agent.backend.type for agent in team.agents]))


async def _models(settings: BotSettings, warming: Future[object] | None) -> ModelFactory | None:
    """The agents' clients under `MASSGEN_PROVIDER_LIMITS`, held in this process (None: unlimited)."""
    limits = settings.limits()
    if not limits:
        return None
    import asyncio
    import functools

    from bot.settings import call_limits
    from orchestrator import LocalLimits, default_models

    if warming is not None:
        await asyncio.wrap_future(warming)
    return functools.partial(default_models, admission=LocalLimits(call_limits(limits)))


def _tools_factory(service: Any, root: Path) -> Any:
    """`build_run_tools` bound to the approval service (the real tools, sandbox and permission gate)."""

    async def factory(ctx: Any) -> Any:
        from orchestrator import build_run_tools

        return await build_run_tools(ctx, approvals=service, root=root)

    return factory
