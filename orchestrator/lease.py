"""A run's lease: while one process drives a run, another asking for the same run is refused at once.

Nothing dangerous may happen twice: two processes driving one run would both call the models and
could both execute the same approved tool call. The lease is held for the whole drive and ends
with the holder, `kill -9` included, so a resume after a crash needs no clean-up:

- PostgreSQL: a session advisory lock (`pg_try_advisory_lock`) on a connection of its own, keyed by
  a stable 64-bit hash of the run id; the server drops it with the connection. The connection
  names its holder (`application_name`) so that a refusal can say who holds the run.
- SQLite: `flock(LOCK_EX | LOCK_NB)` on `<database>.runs/<run id>.lock` beside the database file;
  the kernel drops it with the process. The file holds its holder's pid, host and start time.
- An in-memory database lives in one process only: there is nothing to share, so no lease.

The holder's details are advisory (for the refusal's message); the lock is what counts. While the
holder lives, its lease can still be taken away from outside (its session killed, its lock file
removed); `RunLease.lost()` looks every `CHECK_EVERY` seconds and says so, and the holder must stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import RunBusy, RunStoreError
from orchestrator.store import KeptLease, LeaseHolder

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from orchestrator.ports import RunLease

_NAMESPACE = b"massgen-chatops/run-lease/v1:"  # fixed: every version of the code derives the same key
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_APP_PREFIX = "massgen-run"  # application_name: "massgen-run <pid> <since> <host>" (63 bytes at most)


def lease_key(run_id: str) -> int:
    """The run's advisory-lock key: a signed 64-bit hash of the id under a fixed namespace."""
    digest = hashlib.blake2b(_NAMESPACE + run_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_file(database: str | Path, run_id: str) -> Path:
    """Where a SQLite database keeps a run's lock: `<dir>/<name>.runs/<id>.lock`.

    Run ids are user input (`--resume`): an id that is not a plain name becomes its hash, so a
    lock never lands outside that folder (and `_` never starts a plain name, so they cannot meet).
    The database's real path counts: processes reaching one file by two paths share its locks.
    """
    path = Path(os.path.realpath(database))
    name = run_id if _SAFE_ID.fullmatch(run_id) else "_" + hashlib.blake2b(run_id.encode()).hexdigest()[:40]
    return path.parent / f"{path.name}.runs" / f"{name}.lock"


CHECK_EVERY = 1.0  # seconds between two looks at whether a held lease is still held


@contextlib.asynccontextmanager
async def hold_run(engine: AsyncEngine, run_id: str) -> AsyncIterator[RunLease]:
    """Hold `run_id` for as long as the block runs; `RunBusy` at once when another holder has it."""
    dialect, database = engine.dialect.name, engine.url.database
    if dialect == "postgresql":
        async with _advisory_lock(engine, run_id) as lease:
            yield lease
    elif dialect == "sqlite" and database and database != ":memory:" and "mode=memory" not in database:
        path = lock_file(database, run_id)
        fd = await asyncio.to_thread(_take, path, run_id)
        try:
            yield _FileLease(path, fd)
        finally:
            _give_back(path, fd)
    elif dialect == "sqlite":
        yield KeptLease()  # an in-memory database: no other process can see the run
    else:  # fail closed: an unknown database gets no run driven without a lease
        raise RunStoreError(f"run {run_id}: no lease on a {dialect} database")


# ---- SQLite: flock() on a file per run ----------------------------------------------------------


def _take(path: Path, run_id: str) -> int:
    """The locked file's descriptor, its holder written in it; `RunBusy` when another holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)  # not inherited by the commands agents run
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunBusy(run_id, _file_holder(path)) from None
        # A holder removes the file before it lets go: locking a file no longer at the path locks
        # nothing anybody else will see, so take the one that is there now instead.
        if _same_file(path, fd):
            break
        os.close(fd)
    holder = LeaseHolder.here()
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": holder.pid, "host": holder.host, "since": holder.since}).encode(), 0)
    return fd


class _FileLease:
    """Held while the lock file at the path is the one this process locked."""

    def __init__(self, path: Path, fd: int) -> None:
        self._path, self._fd = path, fd

    async def lost(self) -> str:
        """Return once the file at the path is gone or another one (someone removed the lock)."""
        while True:  # a look at the file system, nothing to wait on
            await asyncio.sleep(CHECK_EVERY)
            if not _same_file(self._path, self._fd):
                return f"its lock file {self._path} was removed"


def _same_file(path: Path, fd: int) -> bool:
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (at_path.st_dev, at_path.st_ino) == (mine.st_dev, mine.st_ino)


def _give_back(path: Path, fd: int) -> None:
    """Remove the file while still holding it (the next holder makes a new one), then let go."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.close(fd)


def _file_holder(path: Path) -> LeaseHolder | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return LeaseHolder(pid=int(data["pid"]), host=str(data["host"]), since=float(data["since"]))
    except (OSError, ValueError, KeyError, TypeError):  # being written, or not ours: the lock still counts
        return None


# ---- PostgreSQL: a session advisory lock on a connection of its own ------------------------------

# The lease connection must not be closed by the server for being idle: that would end the lease
# silently. Keepalives make the server notice a holder whose machine (not only process) died.
_SESSION = (  # through pg_settings: a server without a setting (idle_session_timeout: 14+) skips it
    "SELECT set_config(s.name, v.value, false) FROM pg_settings s JOIN (VALUES"
    " ('idle_session_timeout', '0'), ('idle_in_transaction_session_timeout', '0'),"
    " ('tcp_keepalives_idle', '30'), ('tcp_keepalives_interval', '10'), ('tcp_keepalives_count', '3'),"
    " ('application_name', CAST(:name AS text))) AS v(name, value) ON s.name = v.name"
)
_DEAD_HOLDER_GRACE = 0.25
_HOLDER = (
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid = :high"
    " AND l.objid = :low AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


@contextlib.asynccontextmanager
async def _advisory_lock(engine: AsyncEngine, run_id: str) -> AsyncIterator[_AdvisoryLease]:
    from sqlalchemy import text

    key, holder = lease_key(run_id), LeaseHolder.here()
    name = f"{_APP_PREFIX} {holder.pid} {int(holder.since)} {holder.host}".encode()[:63]
    async with engine.connect() as conn:
        await conn.execute(text(_SESSION), {"name": name.decode(errors="ignore")})
        if not await _try_lock(conn, key):
            other = await _advisory_holder(conn, key)
            await conn.rollback()
            raise RunBusy(run_id, other)
        await conn.commit()  # never idle in a transaction: the lock is the session's, not the transaction's
        lease = _AdvisoryLease(conn)
        try:
            yield lease
        finally:
            async with lease.using:  # not while a check is on the wire
                # The lock is let go before this returns: the next lease here must find it free. A
                # session that failed has lost it already; either way the connection is discarded,
                # not pooled, so its session ends with the settings above (and the lock, if still held).
                try:
                    with contextlib.suppress(Exception):
                        await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                finally:
                    await conn.invalidate()


class _AdvisoryLease:
    """Held while the session that took the lock is alive."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self.using = asyncio.Lock()

    async def lost(self) -> str:
        """Return once the lease's connection fails (the server, or something between, dropped it)."""
        from sqlalchemy import text

        while True:
            await asyncio.sleep(CHECK_EVERY)
            async with self.using:
                try:
                    await self._conn.execute(text("SELECT 1"))
                    await self._conn.commit()
                except Exception as exc:  # any failure: the session, and the lock with it, may be gone
                    return f"its database connection failed: {type(exc).__name__}"


async def _try_lock(conn: AsyncConnection, key: int) -> bool:
    """Take the lock, or say no within `_DEAD_HOLDER_GRACE` seconds.

    A holder killed a moment ago still holds it until its server process has read the closed
    connection and ended (milliseconds): a caller that saw the holder die must not be told no.
    """
    from sqlalchemy import text

    deadline = time.monotonic() + _DEAD_HOLDER_GRACE
    while not (await conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key})).scalar():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_DEAD_HOLDER_GRACE / 10)
    return True


async def _advisory_holder(conn: AsyncConnection, key: int) -> LeaseHolder | None:
    from sqlalchemy import text

    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    found = await conn.execute(text(_HOLDER), {"high": unsigned >> 32, "low": unsigned & 0xFFFF_FFFF})
    words = str(found.scalar() or "").split(" ", 3)
    if len(words) != 4 or words[0] != _APP_PREFIX or not words[1].isdigit() or not words[2].isdigit():
        return None  # another role's session (its details are hidden) or not ours
    return LeaseHolder(pid=int(words[1]), host=words[3], since=float(words[2]))
