"""`massgen-bot`: the command line. Each subcommand lives in its own module of this room.

`run` (and its terminal view, `run_view`), `approvals` (with `audit`), `permissions`, `serve`
(with `socket` and `start`), `db` (schema migrations), `health` (the container health check).
Only the chosen subcommand's module is imported.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module exposes `register(subparsers)`; it sets `func` (argparse.Namespace -> int exit code).
# Commands map to the module that registers them, so a command imports only its own module: start-up
# time counts (`massgen-bot run` to its first model request is a measured target).
_COMMAND_MODULES = {
    "permissions": "bot.cli.permissions",
    "approvals": "bot.cli.approvals",
    "audit": "bot.cli.approvals",
    "db": "bot.cli.db",
    "health": "bot.cli.health",
    "run": "bot.cli.run",
    "serve": "bot.cli.serve",
    "socket": "bot.cli.serve",
    "start": "bot.cli.serve",
    "playground": "bot.cli.serve",
    "worker": "bot.cli.serve",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (given a known command name) one holding just that command's module."""
    parser = argparse.ArgumentParser(
        prog="massgen-bot",
        description="Run a team of AI agents from Slack or the terminal; humans approve risky actions.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = _COMMAND_MODULES.get(command or "")
    modules = [wanted] if wanted else list(dict.fromkeys(_COMMAND_MODULES.values()))
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: the process's arguments) and run the chosen subcommand."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list[0] if args_list else None)
    args = parser.parse_args(args_list)
    try:
        code: int = args.func(args)
    except Exception as exc:
        from bot.migrations import SchemaBehindError  # loaded only on failure: start-up time counts

        if not isinstance(exc, SchemaBehindError):
            raise
        print(f"massgen-bot: {exc}", file=sys.stderr)
        return 1
    return code


__all__ = ["build_parser", "main"]
