"""Schema migrations (Alembic): `massgen-bot db upgrade`; SQLite upgrades itself at start-up.

The migration scripts live in this package (`versions/`), so an installed wheel can upgrade its
database. A new (empty) database skips them: its tables are created from the stores' metadata and
stamped with the head revision in one transaction, as Alembic documents for building a database from
scratch, and without importing Alembic (start-up time counts; a test pins that both give one schema).
A database made before migrations existed (by `create_schema`) is detected by its tables,
brought to the baseline by those same idempotent functions and stamped, then upgraded like any other.
Concurrent upgrades are serialised from the first look at the schema to the last change: a session
advisory lock on PostgreSQL, a file lock on SQLite (whose DDL is made one transaction, not one per table).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, inspect, text
from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)

# The newest revision this code needs; a test pins it to the scripts' head. Checking it needs no
# Alembic import, so a start-up on an up-to-date database pays only one SELECT.
HEAD = "0007"
BASELINE = "0001"  # what `create_schema` made before migrations existed
UPGRADE_COMMAND = "massgen-bot db upgrade"
_LEGACY_TABLES = ("approval_requests", "approval_audit", "runs", "run_events", "slack_runs", "slack_outbox")
_LOCK_KEY = 0x6D617373_67656F  # arbitrary, fixed; not the schema lock of approvals.sql

UpgradePolicy = Literal["auto", "check"]

# Alembic's own version table, as `alembic stamp` creates it (a test compares the two).
_VERSION_TABLE = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


class SchemaBehindError(RuntimeError):
    """The database is older than this code and the policy says not to upgrade it here."""

    def __init__(self, current: str | None) -> None:
        self.current = current
        at = f"at revision {current}" if current else "not initialised"
        super().__init__(f"the database schema is {at}, this version needs {HEAD}: run `{UPGRADE_COMMAND}`")


def alembic_config(url: str | None = None) -> Config:
    """Alembic's configuration without an alembic.ini: the scripts are this package's data."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "bot:migrations")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url)
    return config


def _read_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    value = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return None if value is None else str(value)


def _has_legacy_tables(conn: Connection) -> bool:
    tables = set(inspect(conn).get_table_names())
    return any(name in tables for name in _LEGACY_TABLES)


async def schema_revision(engine: AsyncEngine) -> str | None:
    """The database's revision (None: never migrated)."""
    async with engine.connect() as conn:
        return await conn.run_sync(_read_revision)


@contextlib.asynccontextmanager
async def _migration_lock(engine: AsyncEngine) -> AsyncIterator[None]:
    """Held from the first look at the schema to the last change: one migrator at a time.

    PostgreSQL: a session advisory lock on a connection of its own. SQLite: flock() on the file.
    """
    if engine.dialect.name == "postgresql":
        async with engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _LOCK_KEY})
            await conn.commit()
            try:
                yield
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _LOCK_KEY})
                await conn.commit()
        return
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    # flock() on the database file itself: SQLite locks byte ranges with fcntl(), independent of it.
    path = Path(database)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = await asyncio.to_thread(path.open, "ab")
    with handle:
        await asyncio.to_thread(fcntl.flock, handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _config(conn: Connection) -> Config:
    config = alembic_config()
    config.attributes["connection"] = conn  # env.py migrates on this connection
    return config


def _is_empty(conn: Connection) -> bool:
    """No table of ours and no version table: a new database."""
    from bot.migrations.schema import target_metadata

    ours = {name for metadata in target_metadata() for name in metadata.tables} | {"alembic_version"}
    return not ours & set(inspect(conn).get_table_names())


def _create_at_head(conn: Connection) -> None:
    """Every table from the stores' metadata (with the audit triggers), stamped with HEAD."""
    from bot.migrations.schema import target_metadata

    for metadata in target_metadata():
        metadata.create_all(conn)
    _VERSION_TABLE.create(conn)
    conn.execute(_VERSION_TABLE.insert().values(version_num=HEAD))


def _upgrade(conn: Connection, revision: str, *, scripts: bool = False) -> None:
    # Checked under the migration lock: a concurrent start-up may have created it meanwhile.
    if not scripts and revision in ("head", HEAD) and _is_empty(conn):
        _create_at_head(conn)
        return
    from alembic import command

    # Another process may have stamped it since we looked: stamp only what is still unversioned.
    if _read_revision(conn) is None and _has_legacy_tables(conn):
        command.stamp(_config(conn), BASELINE)
    command.upgrade(_config(conn), revision)


def _downgrade(conn: Connection, revision: str) -> None:
    from alembic import command

    command.downgrade(_config(conn), revision)


async def _run(engine: AsyncEngine, step: Callable[[Connection, str], None], revision: str) -> None:
    """`step` in one transaction; the caller holds the migration lock.

    SQLite's driver would commit each CREATE on its own (it opens transactions only for DML), so a
    crash half-way through would leave half a schema: the transaction is begun explicitly.
    """
    async with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            await conn.exec_driver_sql("BEGIN IMMEDIATE")
        await conn.run_sync(step, revision)


async def upgrade(engine: AsyncEngine, revision: str = "head", *, scripts: bool = False) -> str | None:
    """Bring the database to `revision` (default: head); returns the revision it is at afterwards.

    A new database is created at head from the metadata unless `scripts` asks for every migration
    script to run (what the tests compare that shortcut with).
    """
    # Looked at under the lock: a concurrent start-up creating a new database must not be mistaken
    # for one made before migrations (it has some tables and no version yet).
    async with _migration_lock(engine):
        async with engine.connect() as conn:
            current = await conn.run_sync(_read_revision)
            legacy = current is None and await conn.run_sync(_has_legacy_tables)
        if legacy:
            await _bring_legacy_to_baseline(engine)
            log.info("database made before migrations: brought to %s and stamped", BASELINE)
        await _run(engine, functools.partial(_upgrade, scripts=scripts), revision)
    return await schema_revision(engine)


async def _bring_legacy_to_baseline(engine: AsyncEngine) -> None:
    """The pre-migration schema functions: idempotent, and they add what older versions lacked."""
    from approvals import create_schema
    from bot.slack import BotStore
    from orchestrator import create_run_schema

    await create_schema(engine)
    await create_run_schema(engine)
    await BotStore(engine).create_schema()


async def downgrade(engine: AsyncEngine, revision: str) -> str | None:
    """Take the database back to `revision` ("base": empty); for scratch databases and rollbacks."""
    async with _migration_lock(engine):
        await _run(engine, _downgrade, revision)
    return await schema_revision(engine)


def known_revisions() -> set[str]:
    """Every revision the scripts define."""
    from alembic.script import ScriptDirectory

    return {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


async def ensure_schema(engine: AsyncEngine, policy: UpgradePolicy) -> None:
    """At start-up: upgrade (`auto`) or refuse (`check`, raises `SchemaBehindError`) unless at head.

    A revision newer than this code (a rollback after a newer release migrated) is let through with a
    warning: migrations add, they do not take away, so older code keeps working on the newer schema.
    """
    current = await schema_revision(engine)
    if current == HEAD:
        return
    if current is not None and current not in known_revisions():
        log.warning("database schema %s is newer than this version's %s; continuing", current, HEAD)
        return
    if policy == "auto":
        await upgrade(engine)
        return
    raise SchemaBehindError(current)


__all__ = [
    "BASELINE",
    "HEAD",
    "UPGRADE_COMMAND",
    "SchemaBehindError",
    "UpgradePolicy",
    "alembic_config",
    "downgrade",
    "ensure_schema",
    "known_revisions",
    "schema_revision",
    "upgrade",
]
