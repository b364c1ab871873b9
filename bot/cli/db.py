"""`massgen-bot db upgrade|downgrade|current`: the schema migrations (Alembic scripts in `bot/migrations`).

`upgrade` is what a deploy runs before new code serves (a Kubernetes Job, compose's `migrate`
service, systemd's `ExecStartPre`); on SQLite the bot also does it by itself at start-up.
`upgrade --sql --dialect postgresql` prints the DDL instead, for DBAs who apply schema changes by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from bot.settings import BotSettings


def register(subparsers: Any) -> None:
    """Add `db` with its actions."""
    db = subparsers.add_parser("db", help="database schema migrations (upgrade, downgrade, current)")
    actions = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    up = actions.add_parser("upgrade", help="migrate the database ($DATABASE_URL) to the newest schema")
    up.add_argument("revision", nargs="?", default="head", help="target revision (default head)")
    up.add_argument("--sql", action="store_true", help="print the SQL instead of running it")
    up.add_argument(
        "--dialect", choices=("postgresql", "sqlite"), default="postgresql", help="the SQL's dialect (--sql)"
    )
    up.set_defaults(func=_upgrade)
    down = actions.add_parser("downgrade", help="migrate back to REVISION ('base': drop every table)")
    down.add_argument("revision")
    down.set_defaults(func=_downgrade)
    current = actions.add_parser("current", help="print the database's revision and this version's head")
    current.set_defaults(func=_current)


def _upgrade(args: argparse.Namespace) -> int:
    if args.sql:
        from alembic import command

        from bot.migrations import alembic_config

        # Offline mode renders for a dialect, from an empty database (no stamp detection).
        command.upgrade(alembic_config(f"{args.dialect}://"), args.revision, sql=True)
        return 0
    return _with_engine(lambda engine: _report("upgraded to", _do_upgrade(engine, args.revision)))


def _downgrade(args: argparse.Namespace) -> int:
    from bot.migrations import downgrade

    return _with_engine(lambda engine: _report("downgraded to", downgrade(engine, args.revision)))


def _current(_: argparse.Namespace) -> int:
    from bot.migrations import HEAD, schema_revision

    async def show(engine: Any) -> int:
        print(f"database: {await schema_revision(engine) or 'none'}; this version needs: {HEAD}")
        return 0

    return _with_engine(show)


async def _do_upgrade(engine: Any, revision: str) -> str | None:
    from bot.migrations import upgrade

    return await upgrade(engine, revision)


async def _report(verb: str, revision: Any) -> int:
    print(f"massgen-bot: database {verb} {await revision or 'base'}")
    return 0


def _with_engine(action: Any) -> int:
    from approvals import make_engine
    from bot.cli.preflight import state_folder_problem

    settings = BotSettings.load()
    if (problem := state_folder_problem(settings)) is not None:  # it also makes the folder
        print(f"massgen-bot: db: {problem}", file=sys.stderr)
        return 1

    async def main() -> int:
        engine = make_engine(settings.resolved_database_url())
        try:
            code: int = await action(engine)
            return code
        finally:
            await engine.dispose()

    try:
        return asyncio.run(main())
    except Exception as exc:  # a database that does not answer: one line, not a traceback
        print(f"massgen-bot: db: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
