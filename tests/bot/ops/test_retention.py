"""Retention: old finished runs lose their event logs and leftover workspaces; new, running and audit stay."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import AuditEntry, SqlAuditLog, make_engine
from approvals.testing import EPOCH
from bot.migrations import upgrade
from bot.ops import prune, retention_loop
from bot.ops.retention import DAY
from bot.slack import OutboxStore
from orchestrator import ManifestEntry, SpaceUpdate, SqlRunStore, SqlWorkspaceStore
from orchestrator.events import RunFinished, RunStarted

NOW = 1_900_000_000.0


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'r.db'}")
    await upgrade(engine)
    yield engine
    await engine.dispose()


async def add_run(store: SqlRunStore, run_id: str, *, started: float, ended: float | None) -> None:
    await store.append(RunStarted(run_id=run_id, seq=1, at=started, task="t", agents=()))
    if ended is not None:
        await store.append(RunFinished(run_id=run_id, seq=2, at=ended, winner=None, answer="done"))


async def event_count(engine: AsyncEngine, run_id: str) -> int:
    async with engine.connect() as conn:
        query = text("SELECT count(*) FROM run_events WHERE run_id = :r")
        return int((await conn.execute(query, {"r": run_id})).scalar_one())


def workspace(root: Path, name: str, *, age_days: float) -> Path:
    path = root / name / "a1"
    path.mkdir(parents=True)
    (path / "file.txt").write_text("x")
    stamp = NOW - age_days * DAY
    os.utime(root / name, (stamp, stamp))
    return root / name


async def test_prunes_old_finished_runs_and_keeps_new_running_and_audit(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = SqlRunStore(engine)
    await add_run(store, "run-old", started=NOW - 40 * DAY, ended=NOW - 31 * DAY)
    await add_run(store, "run-new", started=NOW - 2 * DAY, ended=NOW - DAY)
    await add_run(store, "run-stuck", started=NOW - 90 * DAY, ended=None)  # still running: never touched
    audit = SqlAuditLog(engine)
    entry = AuditEntry(
        at=EPOCH, run_id="run-old", agent_id="a1", actor="x", action="command(ls)", outcome="allow"
    )
    await audit.record(entry)
    root = tmp_path / "workspaces"
    old = workspace(root, "run-old", age_days=31)
    old_source = workspace(root, "run-old.source", age_days=31)
    new = workspace(root, "run-new", age_days=1)
    stuck = workspace(root, "run-stuck", age_days=90)

    report = await prune(engine, older_than_days=30, workspaces=root, now=NOW)

    assert report.event_rows == 2
    assert sorted(report.workspaces) == ["run-old", "run-old.source"]
    assert await event_count(engine, "run-old") == 0
    assert await event_count(engine, "run-new") == 2
    assert await event_count(engine, "run-stuck") == 1
    assert not old.exists()
    assert not old_source.exists()
    assert new.exists()
    assert stuck.exists()
    summary = await store.get("run-old")  # history still lists it
    assert summary is not None
    assert summary.status == "finished"
    assert await audit.query(run_id="run-old") == [entry]
    again = await prune(engine, older_than_days=30, workspaces=root, now=NOW)
    assert (again.event_rows, again.workspaces) == (0, ())


async def snapshot(store: SqlWorkspaceStore, run_id: str, data: bytes, path: str) -> str:
    digest = hashlib.sha256(data).hexdigest()
    entry = ManifestEntry(path=path, kind="file", mode=0o644, size=len(data), digest=digest)
    await store.save(
        SpaceUpdate(run_id=run_id, space="a1", generation=1, upsert=(entry,), blobs={digest: data})
    )
    return digest


async def test_old_runs_lose_their_snapshots_and_unreferenced_blobs_go(engine: AsyncEngine) -> None:
    runs, spaces = SqlRunStore(engine), SqlWorkspaceStore(engine)
    await add_run(runs, "run-old", started=NOW - 40 * DAY, ended=NOW - 31 * DAY)
    await add_run(runs, "run-live", started=NOW - 40 * DAY, ended=None)
    old = await snapshot(spaces, "run-old", b"only the old run had this\n", "old.txt")
    shared = await snapshot(spaces, "run-old", b"both runs have this\n", "shared.txt")
    await snapshot(spaces, "run-live", b"both runs have this\n", "shared.txt")
    assert time.time() < NOW - 30 * DAY  # the blobs were last used before the cut-off

    report = await prune(engine, older_than_days=30, workspaces=None, now=NOW)

    assert report.snapshots == 1
    assert report.blobs == 1  # the shared one is still referenced by the live run
    assert await spaces.load("run-old") == {}
    assert list(await spaces.load("run-live")) == ["a1"]
    assert await spaces.blobs({old, shared}) == {shared: b"both runs have this\n"}


async def test_delivered_outbox_rows_go_pending_ones_stay(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        for post_id, status, created in (
            ("p-old", "sent", NOW - 31 * DAY),
            ("p-wait", "pending", NOW - 31 * DAY),
        ):
            await conn.execute(
                text(
                    "INSERT INTO slack_outbox (id, kind, seq, channel, kwargs, priority, status, attempts,"
                    " next_attempt_at, created_at) VALUES (:id, 'post', 1, 'C1', '{}', 0, :s, 0, 0, :c)"
                ),
                {"id": post_id, "s": status, "c": created},
            )
    report = await prune(engine, older_than_days=30, workspaces=None, now=NOW)
    assert report.outbox_rows == 1
    assert [row.id for row in await OutboxStore(engine).pending()] == ["p-wait"]


async def test_the_loop_sweeps_at_once_and_stops_when_asked(engine: AsyncEngine, tmp_path: Path) -> None:
    store = SqlRunStore(engine)
    await add_run(store, "run-old", started=NOW - 40 * DAY, ended=NOW - 31 * DAY)
    stop = asyncio.Event()
    loop = asyncio.create_task(
        retention_loop(
            engine, older_than_days=30, workspaces=None, interval=3600, stop=stop, clock=lambda: NOW
        )
    )
    async with asyncio.timeout(5):
        while await event_count(engine, "run-old"):
            await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(loop, 5)


async def test_the_bot_runs_the_sweep_and_close_stops_it(tmp_path: Path) -> None:
    from tests.bot.harness import bot_harness

    async with bot_harness(tmp_path) as bot:
        sweep = bot.services.retention
        assert sweep is not None
        assert not sweep.done()
    assert sweep.done()
    assert sweep.exception() is None
