"""`WorkspaceStore` on SQLAlchemy async (SQLite or PostgreSQL): blobs by sha256, manifests per run.

`workspace_blobs` holds each distinct file content once, whatever run or agent wrote it;
`workspace_spaces` one header per (run, workspace) with its generation and whether it is complete;
`workspace_entries` its paths. Blobs are inserted with ON CONFLICT DO NOTHING (two runs may store
the same content at once); `used_at` is refreshed when a checkpoint finds a blob already there, so
the retention sweep (`prune_unused_blobs`) never takes one a checkpoint is about to reference.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    delete,
    exists,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from orchestrator.ports import ManifestEntry, SpaceManifest, SpaceUpdate

workspace_metadata = MetaData()

workspace_blobs = Table(
    "workspace_blobs",
    workspace_metadata,
    Column("digest", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("used_at", Float, nullable=False),
)

workspace_spaces = Table(
    "workspace_spaces",
    workspace_metadata,
    Column("run_id", String(64), primary_key=True),
    Column("space", String(80), primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("complete", Boolean, nullable=False),
    Column("reason", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)

workspace_entries = Table(
    "workspace_entries",
    workspace_metadata,
    Column("run_id", String(64), primary_key=True),
    Column("space", String(80), primary_key=True),
    Column("path", String(1024), primary_key=True),
    Column("kind", String(8), nullable=False),
    Column("mode", Integer, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("mtime_ns", BigInteger, nullable=False),
    Column("digest", String(64)),
    Column("target", Text),
    Index("ix_workspace_entries_digest", "digest"),
)

_T = TypeVar("_T")
_BATCH = 500  # digests per IN (...) and rows per INSERT: under SQLite's parameter limit


class SqlWorkspaceStore:
    """The workspace store on an async engine it does not own (the tables come from the migrations)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def missing(self, digests: Collection[str]) -> set[str]:
        """The digests without a blob; the others get `used_at` = now (the sweep leaves them alone)."""
        wanted = sorted(set(digests))
        present: set[str] = set()
        async with self.engine.begin() as conn:
            for part in _chunks(wanted):
                column = workspace_blobs.c.digest
                present |= set((await conn.execute(select(column).where(column.in_(part)))).scalars())
            for part in _chunks(sorted(present)):
                stamp = update(workspace_blobs).where(workspace_blobs.c.digest.in_(part))
                await conn.execute(stamp.values(used_at=time.time()))
        return set(wanted) - present

    async def save(self, change: SpaceUpdate) -> None:
        """Blobs, then the space's header and entries, in one transaction."""
        now = time.time()
        key = (workspace_entries.c.run_id == change.run_id) & (workspace_entries.c.space == change.space)
        async with self.engine.begin() as conn:
            blobs = [
                {"digest": d, "size": len(data), "data": data, "used_at": now}
                for d, data in (change.blobs or {}).items()
            ]
            for part in _chunks(blobs, size=50):
                await conn.execute(_insert_ignoring(conn, workspace_blobs), part)
            if change.replace:
                await conn.execute(delete(workspace_entries).where(key))
            else:
                for paths in _chunks(sorted({*change.remove, *(e.path for e in change.upsert)})):
                    await conn.execute(
                        delete(workspace_entries).where(key, workspace_entries.c.path.in_(paths))
                    )
            rows = [_entry_row(change.run_id, change.space, e) for e in change.upsert]
            for part in _chunks(rows):
                await conn.execute(insert(workspace_entries), part)
            await self._header(conn, change, now)

    @staticmethod
    async def _header(conn: AsyncConnection, change: SpaceUpdate, now: float) -> None:
        values = {
            "generation": change.generation,
            "complete": change.complete,
            "reason": change.reason,
            "updated_at": now,
        }
        key = (workspace_spaces.c.run_id == change.run_id) & (workspace_spaces.c.space == change.space)
        done = await conn.execute(update(workspace_spaces).where(key).values(**values))
        if not done.rowcount:
            await conn.execute(
                insert(workspace_spaces).values(run_id=change.run_id, space=change.space, **values)
            )

    async def load(self, run_id: str) -> dict[str, SpaceManifest]:
        """Every space of the run with its entries."""
        async with self.engine.connect() as conn:
            heads = (
                await conn.execute(select(workspace_spaces).where(workspace_spaces.c.run_id == run_id))
            ).all()
            rows = (
                await conn.execute(select(workspace_entries).where(workspace_entries.c.run_id == run_id))
            ).all()
        entries: dict[str, list[ManifestEntry]] = {}
        for row in rows:
            entries.setdefault(row.space, []).append(
                ManifestEntry(
                    path=row.path,
                    kind=row.kind,
                    mode=row.mode,
                    size=row.size,
                    mtime_ns=row.mtime_ns,
                    digest=row.digest,
                    target=row.target,
                )
            )
        return {
            head.space: SpaceManifest(
                space=head.space,
                generation=head.generation,
                complete=bool(head.complete),
                reason=head.reason,
                entries=tuple(entries.get(head.space, ())),
            )
            for head in heads
        }

    async def blobs(self, digests: Collection[str]) -> dict[str, bytes]:
        """The bytes of the digests that are stored."""
        out: dict[str, bytes] = {}
        async with self.engine.connect() as conn:
            for part in _chunks(sorted(set(digests)), size=100):
                query = select(workspace_blobs.c.digest, workspace_blobs.c.data)
                for digest, data in await conn.execute(query.where(workspace_blobs.c.digest.in_(part))):
                    out[digest] = bytes(data)
        return out

    async def drop(self, run_id: str) -> None:
        """Forget the run's manifests."""
        async with self.engine.begin() as conn:
            await conn.execute(delete(workspace_entries).where(workspace_entries.c.run_id == run_id))
            await conn.execute(delete(workspace_spaces).where(workspace_spaces.c.run_id == run_id))


async def prune_unused_blobs(conn: AsyncConnection, *, unused_since: float) -> int:
    """Delete blobs no manifest references that nobody used since `unused_since`; how many went."""
    referenced = exists().where(workspace_entries.c.digest == workspace_blobs.c.digest)
    statement = delete(workspace_blobs).where(~referenced, workspace_blobs.c.used_at < unused_since)
    return (await conn.execute(statement)).rowcount or 0


def _insert_ignoring(conn: AsyncConnection, table: Table) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).on_conflict_do_nothing(index_elements=[table.c.digest])


def _entry_row(run_id: str, space: str, entry: ManifestEntry) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "space": space,
        "path": entry.path,
        "kind": entry.kind,
        "mode": entry.mode,
        "size": entry.size,
        "mtime_ns": entry.mtime_ns,
        "digest": entry.digest,
        "target": entry.target,
    }


def _chunks(items: Sequence[_T], *, size: int = _BATCH) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
