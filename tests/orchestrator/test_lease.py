"""A run's lease: one holder at a time, across processes, gone with its holder (`kill -9` included).

Real SQLite files, a real PostgreSQL (marked `postgres`), and real processes holding the lease.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from approvals.sql import make_engine
from orchestrator import InMemoryRunStore, LeaseHolder, RunBusy, RunStore, SqlRunStore
from orchestrator.lease import lease_key, lock_file
from tests.conftest import SQL_DATABASES, empty_database

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import asyncio, sys
from approvals.sql import make_engine
from orchestrator import SqlRunStore

async def main() -> None:
    store = SqlRunStore(make_engine(sys.argv[1]))
    async with store.lease(sys.argv[2]):
        print("held", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until killed

asyncio.run(main())
"""


@pytest.fixture(params=SQL_DATABASES)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of an empty database: a SQLite file under tmp_path, or a scratch PostgreSQL database."""
    async with empty_database(request.param, f"sqlite:///{tmp_path / 'state' / 'massgen.db'}") as url:
        yield url


@pytest.fixture
async def store(database: str) -> AsyncIterator[SqlRunStore]:
    engine = make_engine(database)
    yield SqlRunStore(engine)
    await engine.dispose()


async def refused(store: RunStore, run_id: str) -> RunBusy:
    """The refusal of a lease on `run_id` (the test fails if it is granted)."""
    with pytest.raises(RunBusy) as caught:
        async with store.lease(run_id):
            pytest.fail(f"{run_id} was leased twice")
    return caught.value


@pytest.mark.parametrize("kind", ["memory", "sql"])
async def test_a_held_run_is_refused_naming_its_holder_and_free_again_once_let_go(
    kind: str, tmp_path: Path
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'runs.db'}")
    store: RunStore = InMemoryRunStore() if kind == "memory" else SqlRunStore(engine)
    try:
        async with store.lease("run-abc"):
            busy = await refused(store, "run-abc")
            async with store.lease("run-other"):  # only that run is held
                pass
    finally:
        await engine.dispose()
    assert busy.run_id == "run-abc"
    assert busy.holder is not None
    assert (busy.holder.pid, busy.holder.host) == (os.getpid(), socket.gethostname())
    assert str(busy) == f"run run-abc is being driven by another process ({busy.holder.describe()})"
    async with store.lease("run-abc"):  # let go: the next holder gets it
        pass


async def test_the_lease_holds_against_another_engine_and_names_it(store: SqlRunStore, database: str) -> None:
    other = make_engine(database)  # another pool, other connections: as another process would
    try:
        async with store.lease("run-abc"):
            busy = await refused(SqlRunStore(other), "run-abc")
        async with SqlRunStore(other).lease("run-abc"):
            await refused(store, "run-abc")
    finally:
        await other.dispose()
    assert busy.holder is not None
    assert (busy.holder.pid, busy.holder.host) == (os.getpid(), socket.gethostname())
    assert abs(busy.holder.since - time.time()) < 60


async def test_a_holder_killed_with_sigkill_leaves_the_run_free_at_once(
    store: SqlRunStore, database: str
) -> None:
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLD, database, "run-abc",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    assert holder.stdout is not None
    try:
        assert await asyncio.wait_for(holder.stdout.readline(), 30) == b"held\n"
        busy = await refused(store, "run-abc")
        assert busy.holder is not None
        assert busy.holder.pid == holder.pid
        assert f"pid {holder.pid} on host {socket.gethostname()}, since " in str(busy)
    finally:
        holder.kill()
        await holder.wait()
    async with store.lease("run-abc"):  # no stale lock to clean up, no wait
        pass


async def test_run_ids_that_are_not_plain_names_stay_inside_the_lock_folder(tmp_path: Path) -> None:
    database = tmp_path / "state" / "massgen.db"
    folder = tmp_path / "state" / "massgen.db.runs"
    assert lock_file(database, "run-3f2a9c") == folder / "run-3f2a9c.lock"
    strange = ["../../../etc/passwd", "/tmp/x", "a/b", ".hidden", "", "_x", "x" * 65, "ünï", "a b"]
    paths = [lock_file(database, run_id) for run_id in strange]
    assert all(path.parent == folder and path.name.startswith("_") for path in paths)
    assert len(set(paths)) == len(strange)  # different ids, different locks
    engine = make_engine(f"sqlite:///{database}")
    try:
        store = SqlRunStore(engine)
        async with store.lease("../../escape"):
            assert [p.name for p in folder.iterdir()] == [lock_file(database, "../../escape").name]
            await refused(store, "../../escape")
        assert not (tmp_path / "escape.lock").exists()
        assert list(folder.iterdir()) == []  # the holder removes its file as it lets go
    finally:
        await engine.dispose()


async def test_a_lock_held_by_a_stranger_refuses_without_a_holder_to_name(tmp_path: Path) -> None:
    database = tmp_path / "massgen.db"
    path = lock_file(database, "run-abc")
    path.parent.mkdir()
    path.write_text("not json")
    engine = make_engine(f"sqlite:///{database}")
    with path.open("rb") as stranger:
        fcntl.flock(stranger.fileno(), fcntl.LOCK_EX)  # the lock counts, whatever the file says
        try:
            busy = await refused(SqlRunStore(engine), "run-abc")
        finally:
            await engine.dispose()
    assert busy.holder is None
    assert str(busy) == "run run-abc is being driven by another process"


async def test_an_in_memory_database_needs_no_lease() -> None:
    engine = make_engine("sqlite:///:memory:")  # nobody outside this process can see it
    try:
        store = SqlRunStore(engine)
        async with store.lease("run-abc"), store.lease("run-abc"):
            pass
    finally:
        await engine.dispose()


def test_the_key_is_a_stable_signed_64_bit_hash_of_the_id() -> None:
    assert lease_key("run-abc") == lease_key("run-abc") != lease_key("run-abd")
    keys = {lease_key(f"run-{n}") for n in range(1000)}
    assert len(keys) == 1000
    assert all(-(2**63) <= key < 2**63 for key in keys)
    assert lease_key("run-abc") == 1821977506341836419  # pinned: every version must derive the same key


def test_the_holder_says_the_date_only_when_it_is_not_today() -> None:
    since = 1_796_150_402.0  # 2026-12-01 18:40:02 UTC
    holder = LeaseHolder(pid=1234, host="h", since=since)
    assert holder.describe(now=since + 60) == "pid 1234 on host h, since 18:40:02 UTC"
    assert holder.describe(now=since + 86_400) == "pid 1234 on host h, since 2026-12-01 18:40:02 UTC"


async def backend_of(database: str, run_id: str) -> int:
    """The PostgreSQL server process holding `run_id`'s lease."""
    from sqlalchemy import text

    unsigned = lease_key(run_id) & 0xFFFF_FFFF_FFFF_FFFF
    engine = make_engine(database)
    try:
        async with engine.connect() as conn:
            where = "locktype = 'advisory' AND classid = :high AND objid = :low"
            found = await conn.execute(
                text(f"SELECT pid FROM pg_locks WHERE {where}"),
                {"high": unsigned >> 32, "low": unsigned & 0xFFFF_FFFF},
            )
            return int(found.scalar_one())
    finally:
        await engine.dispose()


async def take_away(database: str, run_id: str) -> None:
    """What can end a lease while its holder lives: its session killed, or its lock file removed."""
    if database.startswith("sqlite"):
        lock_file(database.removeprefix("sqlite:///"), run_id).unlink()
        return
    from sqlalchemy import text

    backend = await backend_of(database, run_id)
    engine = make_engine(database)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
    finally:
        await engine.dispose()


async def test_a_lease_taken_away_from_a_live_holder_says_so(
    store: SqlRunStore, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("orchestrator.lease.CHECK_EVERY", 0.05)
    async with store.lease("run-abc") as lease:
        with pytest.raises(TimeoutError):  # held: nothing to say
            await asyncio.wait_for(lease.lost(), 0.3)
        await take_away(database, "run-abc")
        why = await asyncio.wait_for(lease.lost(), 10)
        async with SqlRunStore(store.engine).lease("run-abc"):  # another holder may take it now
            pass
    expected = "its database connection failed: " if "postgres" in database else "its lock file "
    assert why.startswith(expected), why


async def test_one_database_by_two_paths_has_one_lock(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "alias.db").symlink_to(tmp_path / "state" / "massgen.db")
    real = make_engine(f"sqlite:///{tmp_path / 'state' / 'massgen.db'}")
    alias = make_engine(f"sqlite:///{tmp_path / 'elsewhere' / 'alias.db'}")
    try:
        async with SqlRunStore(real).lease("run-abc"):
            await refused(SqlRunStore(alias), "run-abc")
    finally:
        await real.dispose()
        await alias.dispose()
