"""`massgen-bot`: the command line. Each subcommand lives in its own `bot/cli_*.py` module."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module exposes `register(subparsers)`; it sets `func` (argparse.Namespace -> int exit code).
_COMMAND_MODULES = (
    "bot.cli_permissions",
    "bot.cli_approvals",
    "bot.cli_run",
    "bot.cli_serve",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="massgen-bot",
        description="Run a team of AI agents from Slack or the terminal; humans approve risky actions.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
