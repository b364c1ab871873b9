"""Alembic migrations: head is exactly the stores' tables, on SQLite and PostgreSQL, from any start."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import SqlApprovalStore, create_schema, make_engine
from approvals.testing import sample_request
from bot.cli import main
from bot.migrations import (
    BASELINE,
    HEAD,
    SchemaBehindError,
    _migration_lock,
    _run,
    _upgrade,
    alembic_config,
    downgrade,
    ensure_schema,
    known_revisions,
    schema_revision,
    upgrade,
)
from bot.migrations.schema import target_metadata
from bot.slack import BotStore
from orchestrator import create_run_schema
from tests.conftest import SQL_DATABASES, empty_database


@pytest.fixture(params=SQL_DATABASES)
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """An empty database: a SQLite file, or a scratch PostgreSQL database when a server runs."""
    async with empty_database(request.param, f"sqlite:///{tmp_path / 'm.db'}") as url:
        engine = make_engine(url)
        yield engine
        await engine.dispose()


def _diff(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    # Alembic compares against a list of MetaData too (as env.py's target_metadata); its stub says one.
    return list(compare_metadata(context, target_metadata()))  # type: ignore[arg-type]


async def schema_diff(engine: AsyncEngine) -> list[Any]:
    async with engine.connect() as conn:
        return await conn.run_sync(_diff)


async def tables(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


def test_head_is_the_scripts_head_and_the_baseline_is_their_root() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_heads() == [HEAD]
    assert [s.revision for s in script.walk_revisions() if s.down_revision is None] == [BASELINE]
    assert HEAD in known_revisions()


async def test_upgrade_of_an_empty_database_yields_exactly_the_models(engine: AsyncEngine) -> None:
    assert await schema_diff(engine) != [], "an empty database differs (the check can fail)"
    assert await upgrade(engine) == HEAD
    assert await schema_diff(engine) == []
    assert await schema_revision(engine) == HEAD


async def test_the_scripts_on_an_empty_database_yield_exactly_the_models(engine: AsyncEngine) -> None:
    assert await upgrade(engine, scripts=True) == HEAD
    assert await schema_diff(engine) == []


def _describe(conn: Connection) -> dict[str, Any]:
    """Everything a schema is made of, as the database reports it (the DDL itself on SQLite)."""
    inspector = inspect(conn)
    tables: dict[str, Any] = {}
    for name in sorted(inspector.get_table_names()):
        tables[name] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], c.get("default"))
                for c in inspector.get_columns(name)
            ],
            "pk": inspector.get_pk_constraint(name),
            "fks": inspector.get_foreign_keys(name),
            "indexes": sorted(inspector.get_indexes(name), key=lambda i: str(i["name"])),
            "unique": sorted(inspector.get_unique_constraints(name), key=lambda u: str(u["name"])),
        }
    if conn.dialect.name == "sqlite":
        # Tables are compared above by structure: a column added later (ALTER TABLE ... ADD COLUMN)
        # is stored after the table's constraints in SQLite's text, the same table all the same.
        query = (
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type != 'table' ORDER BY type, name"
        )
    else:
        query = (
            "SELECT trigger_name, event_manipulation, action_statement FROM information_schema.triggers "
            "WHERE trigger_schema = current_schema() ORDER BY 1, 2"
        )
    rows = [tuple(row) for row in conn.execute(text(query))]
    versions = [tuple(row) for row in conn.execute(text("SELECT version_num FROM alembic_version"))]
    return {"tables": tables, "ddl": rows, "versions": versions}


async def describe(engine: AsyncEngine) -> dict[str, Any]:
    async with engine.connect() as conn:
        return await conn.run_sync(_describe)


async def test_a_new_database_made_from_the_models_is_what_the_scripts_make(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    """The fast path (create from the metadata, stamp head) against every script run in turn."""
    assert await upgrade(engine) == HEAD
    fresh = await describe(engine)
    await downgrade(engine, "base")  # keeps the (empty) version table: the scripts run this time
    async with engine.begin() as conn:
        await conn.execute(text("DROP TABLE alembic_version"))
    assert await tables(engine) == set()
    assert await upgrade(engine, scripts=True) == HEAD
    scripted = await describe(engine)
    assert set(fresh["tables"]) >= {"alembic_version", "approval_audit", "runs", "slack_outbox"}
    assert fresh["ddl"], "the triggers (PostgreSQL) or the DDL (SQLite) are compared"
    assert fresh == scripted


def test_start_up_on_a_new_database_and_at_head_imports_no_alembic(tmp_path: Path) -> None:
    """Creating a new database and checking one at head stay off Alembic (its import is ~0.2 s)."""
    code = (
        "import asyncio, sys\n"
        "from approvals import make_engine\n"
        "from bot.migrations import HEAD, ensure_schema, schema_revision\n"
        "async def main():\n"
        f"    engine = make_engine('sqlite:///{tmp_path / 'n.db'}')\n"
        "    await ensure_schema(engine, 'auto')\n"
        "    await ensure_schema(engine, 'check')\n"
        "    assert await schema_revision(engine) == HEAD\n"
        "    await engine.dispose()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    command = [sys.executable, "-c", code]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"


async def test_the_audit_trail_is_append_only_after_upgrade(engine: AsyncEngine) -> None:
    await upgrade(engine)
    from approvals import AuditEntry, SqlAuditLog
    from approvals.testing import EPOCH

    entry = AuditEntry(at=EPOCH, run_id="r", agent_id="a", actor="x", action="command(ls)", outcome="allow")
    await SqlAuditLog(engine).record(entry)
    for statement in ("UPDATE approval_audit SET actor = 'y'", "DELETE FROM approval_audit"):
        with pytest.raises(DBAPIError, match="append-only"):
            async with engine.begin() as conn:
                await conn.execute(text(statement))


async def test_downgrade_to_base_and_back_round_trips(engine: AsyncEngine) -> None:
    await upgrade(engine)
    assert await downgrade(engine, "base") is None
    assert await tables(engine) <= {"alembic_version"}
    assert await upgrade(engine) == HEAD
    assert await schema_diff(engine) == []


async def _legacy_database(engine: AsyncEngine) -> None:
    """What `create_schema` made before migrations existed; with a row that must survive."""
    await create_schema(engine)
    await create_run_schema(engine)
    await BotStore(engine).create_schema()
    await SqlApprovalStore(engine).insert(sample_request())


async def test_a_database_made_by_create_schema_is_stamped_and_kept(engine: AsyncEngine) -> None:
    await _legacy_database(engine)
    assert await schema_revision(engine) is None
    assert await upgrade(engine) == HEAD
    assert await schema_diff(engine) == []
    assert await SqlApprovalStore(engine).get("req-1") is not None


async def test_an_older_database_gains_the_columns_it_lacked(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    await _legacy_database(engine)
    async with engine.begin() as conn:  # as before issue 8: no conversation column, no run team
        await conn.execute(text("ALTER TABLE approval_requests DROP COLUMN conversation"))
        await conn.execute(text("DROP INDEX ix_runs_channel"))
        await conn.execute(text("ALTER TABLE runs DROP COLUMN team"))
    assert await schema_diff(engine) != []
    await upgrade(engine)
    assert await schema_diff(engine) == []
    assert await SqlApprovalStore(engine).get("req-1") is not None
    await engine.dispose()


async def test_concurrent_upgrades_of_a_new_database_are_safe(engine: AsyncEngine) -> None:
    others = [make_engine(engine.url.render_as_string(hide_password=False)) for _ in range(3)]
    try:
        assert await asyncio.gather(*(upgrade(e) for e in [engine, *others])) == [HEAD] * 4
    finally:
        for other in others:
            await other.dispose()
    assert await schema_diff(engine) == []


async def test_nothing_looks_at_the_schema_while_another_migrator_holds_the_lock(engine: AsyncEngine) -> None:
    # Another start-up half-way through creating a new database: one table, no version yet. Seen
    # from outside the lock that looks like a database made before migrations (a CI run once raced
    # into "table already exists" that way); the second upgrade must wait instead.
    url = engine.url.render_as_string(hide_password=False)
    other = make_engine(url)
    try:
        async with _migration_lock(engine):
            async with engine.begin() as conn:
                await conn.execute(text("CREATE TABLE approval_requests (id VARCHAR(64) PRIMARY KEY)"))
            waiting = asyncio.create_task(upgrade(other))
            await asyncio.sleep(0.5)
            assert not waiting.done()
            assert await tables(engine) == {"approval_requests"}
            async with engine.begin() as conn:
                await conn.execute(text("DROP TABLE approval_requests"))
            await _run(engine, _upgrade, "head")
        assert await asyncio.wait_for(waiting, 30) == HEAD
    finally:
        await other.dispose()
    assert await schema_diff(engine) == []


async def test_a_failed_migration_leaves_no_half_schema(engine: AsyncEngine) -> None:
    def create_then_fail(conn: Connection, revision: str) -> None:
        _upgrade(conn, revision)
        raise RuntimeError("the process dies here")

    with pytest.raises(RuntimeError, match="dies"):
        async with _migration_lock(engine):
            await _run(engine, create_then_fail, "head")
    assert await tables(engine) == set()
    assert await upgrade(engine) == HEAD


async def test_check_policy_refuses_naming_the_command_and_auto_upgrades(engine: AsyncEngine) -> None:
    with pytest.raises(SchemaBehindError, match="run `massgen-bot db upgrade`"):
        await ensure_schema(engine, "check")
    await ensure_schema(engine, "auto")
    assert await schema_revision(engine) == HEAD
    await ensure_schema(engine, "check")  # at head: nothing to refuse


async def test_a_newer_schema_than_this_code_is_let_through(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    await upgrade(engine)
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    await ensure_schema(engine, "check")
    assert await schema_revision(engine) == "9999"
    await engine.dispose()


def test_cli_upgrade_current_and_downgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    assert main(["db", "current"]) == 0
    assert main(["db", "upgrade"]) == 0
    assert main(["db", "current"]) == 0
    assert main(["db", "downgrade", "base"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"database: none; this version needs: {HEAD}",
        f"massgen-bot: database upgraded to {HEAD}",
        f"database: {HEAD}; this version needs: {HEAD}",
        "massgen-bot: database downgraded to base",
    ]


def test_cli_prints_the_postgresql_ddl_for_dbas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade", "--sql", "--dialect", "postgresql"]) == 0
    sql = capsys.readouterr().out
    for table in ("approval_requests", "approval_audit", "runs", "run_events", "slack_outbox", "slack_runs"):
        assert f"CREATE TABLE {table} " in sql
    assert "EXECUTE FUNCTION approval_audit_append_only()" in sql
    assert "CREATE TABLE engine_controls " in sql
    assert "CREATE TABLE engine_heartbeats " in sql
    assert sql.rstrip().endswith("COMMIT;")
    assert f"version_num='{HEAD}'" in sql or f"VALUES ('{HEAD}')" in sql  # the last revision stamps HEAD


def test_cli_reports_an_unreachable_database_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    assert main(["db", "upgrade"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("massgen-bot: db: ")
    assert err.count("\n") == 1


def test_a_database_behind_with_policy_check_stops_the_cli_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.db").touch()  # exists, never migrated
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'old.db'}")
    monkeypatch.setenv("MASSGEN_DB_UPGRADE", "check")
    assert main(["approvals", "list", "--all"]) == 1
    assert capsys.readouterr().err == (
        f"massgen-bot: the database schema is not initialised, this version needs {HEAD}: "
        "run `massgen-bot db upgrade`\n"
    )
