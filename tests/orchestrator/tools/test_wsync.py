"""Workspace snapshots: checkpoints into the SQL store and the restore on another machine (issue 11).

Real `RunWorkspaces` on disk, the real `SqlWorkspaceStore` on SQLite (and PostgreSQL when a server
is given); "another machine" is a second workspace root that starts empty.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import make_engine
from orchestrator import ManifestEntry, SpaceUpdate, SqlWorkspaceStore, prune_unused_blobs, workspace_metadata
from orchestrator.tools import RunWorkspaces, SnapshotLimits, WorkspaceSync
from orchestrator.tools.wsync import MARKER
from tests.conftest import SQL_DATABASES, empty_database

AGENTS = ("a0", "a1")


@pytest.fixture(params=SQL_DATABASES)
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    async with empty_database(request.param, f"sqlite:///{tmp_path / 'ws.db'}") as url:
        made = make_engine(url)
        async with made.begin() as conn:
            await conn.run_sync(workspace_metadata.create_all)
        yield made
        await made.dispose()


def make_source(top: Path, files: int = 5) -> Path:
    """A small repository: text files, an executable, a symlink, an empty directory, a read-only file."""
    (top / "src" / "pkg").mkdir(parents=True)
    for i in range(files):
        (top / "src" / "pkg" / f"m{i}.py").write_text(f"value = {i}\n")
    run = top / "run.sh"
    run.write_text("#!/bin/sh\necho hi\n")
    run.chmod(0o755)
    (top / "ro.txt").write_text("read only\n")
    (top / "ro.txt").chmod(0o444)
    (top / "empty").mkdir()
    (top / "link").symlink_to("src/pkg/m0.py")
    (top / "blob.bin").write_bytes(bytes(range(256)) * 4)
    old = time.time_ns() - 10**10  # an old checkout: no file is too recent to trust its stat
    for current, _dirs, names in os.walk(top):
        for name in names:
            os.utime(Path(current) / name, ns=(old, old), follow_symlinks=False)
    return top


def tree(top: Path) -> dict[str, tuple[str, int, str, int]]:
    """Everything that must survive: kind, mode, content (or link text), mtime of files and links."""
    out: dict[str, tuple[str, int, str, int]] = {}
    for current, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            path = Path(current) / name
            info = path.lstat()
            rel = path.relative_to(top).as_posix()
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                out[rel] = ("link", mode, os.readlink(path), info.st_mtime_ns)
            elif stat.S_ISDIR(info.st_mode):
                out[rel] = ("dir", mode, "", 0)
            else:
                out[rel] = ("file", mode, hashlib.sha256(path.read_bytes()).hexdigest(), info.st_mtime_ns)
    return out


async def opened(
    root: Path, store: SqlWorkspaceStore, source: Path | None, limits: SnapshotLimits | None = None
) -> WorkspaceSync:
    spaces = RunWorkspaces.create(root=root, run_id="run-1", agent_ids=AGENTS, source=source)
    sync = WorkspaceSync(store, spaces, limits or SnapshotLimits())
    await sync.snapshot_source()
    return sync


def elsewhere(
    root: Path, source: Path | None, store: SqlWorkspaceStore, limits: SnapshotLimits | None = None
) -> WorkspaceSync:
    spaces = RunWorkspaces(root=root, run_id="run-1", agent_ids=AGENTS, source=source)
    return WorkspaceSync(store, spaces, limits or SnapshotLimits())


def agent_work(workspace: Path) -> None:
    """What an agent does: new, changed, removed and re-moded files, a new link and directory."""
    (workspace / "notes.txt").write_text("made by the agent\n")
    (workspace / "src" / "pkg" / "m1.py").write_text("value = 'changed'\n")
    (workspace / "src" / "pkg" / "m2.py").unlink()
    (workspace / "run.sh").chmod(0o700)
    (workspace / "new" / "deeper").mkdir(parents=True)
    (workspace / "to-notes").symlink_to("notes.txt")
    (workspace / "empty").rmdir()


async def test_another_machine_gets_every_workspace_back_byte_for_byte(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = SqlWorkspaceStore(engine)
    source = make_source(tmp_path / "repo")
    first = await opened(tmp_path / "m1", store, source)
    agent_work(first.spaces.path("a0"))
    await first.checkpoint("a0")
    before = {space: tree(first._top(space)) for space in (".source", *AGENTS)}

    second = elsewhere(tmp_path / "m2", source, store)
    assert await second.reopen() == []
    for space, expected in before.items():
        assert tree(second._top(space)) == expected, space
    assert second.spaces.patch("a0") == first.spaces.patch("a0")
    assert "notes.txt" in (second.spaces.patch("a0") or "")
    # The restored copy is what the next checkpoint compares with: nothing is read again.
    await second.checkpoint("a0")
    assert second.hashed == 0


async def test_a_copy_older_than_the_stored_generation_is_replaced(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = SqlWorkspaceStore(engine)
    source = make_source(tmp_path / "repo")
    first = await opened(tmp_path / "m1", store, source)
    await first.checkpoint("a0")  # nothing changed yet: m1's copy is at generation 0 for a0
    stale_marker = (first.spaces.run_dir / MARKER).read_text()
    # m2 takes the run over, works on, dies; the run comes back to m1, whose disk is behind.
    second = elsewhere(tmp_path / "m2", source, store)
    await second.reopen()
    (second.spaces.path("a0") / "later.txt").write_text("written on m2\n")
    await second.checkpoint("a0")
    (first.spaces.run_dir / MARKER).write_text(stale_marker)
    back = elsewhere(tmp_path / "m1", source, store)
    assert await back.reopen() == []
    assert (back.spaces.path("a0") / "later.txt").read_text() == "written on m2\n"


async def test_a_checkpoint_reads_only_the_files_that_changed(engine: AsyncEngine, tmp_path: Path) -> None:
    store = SqlWorkspaceStore(engine)
    source = make_source(tmp_path / "repo", files=500)
    sync = await opened(tmp_path / "m1", store, source)
    assert sync.hashed == 500 + 3  # the source once, whole: its files, run.sh, ro.txt, blob.bin
    workspace = sync.spaces.path("a0")
    for i in (3, 4, 5):
        (workspace / "src" / "pkg" / f"m{i}.py").write_text(f"value = {i * 10}\n")
    await sync.checkpoint("a0")
    assert sync.hashed == 503 + 3  # the three changed files, not the other 500
    await sync.checkpoint("a0")  # written just now: a same-tick rewrite would not show in the stat
    assert sync.hashed == 506 + 3
    past = time.time_ns() - 10**10
    for i in (3, 4, 5):
        os.utime(workspace / "src" / "pkg" / f"m{i}.py", ns=(past, past))
    await sync.checkpoint("a0")  # changed (mtime) but not in content: read once more
    assert sync.hashed == 509 + 3
    await sync.checkpoint("a0")  # nothing changed since, nothing recent: nothing read or written
    assert sync.hashed == 512
    async with engine.connect() as conn:
        entries = workspace_metadata.tables["workspace_entries"]
        rows = await conn.scalar(select(func.count()).where(entries.c.space == "a0"))
    assert rows == 3  # an agent's manifest is its difference from the source


async def test_blobs_are_stored_once_across_runs_and_pruned_when_unused(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = SqlWorkspaceStore(engine)
    source = make_source(tmp_path / "repo")
    blobs = workspace_metadata.tables["workspace_blobs"]
    await opened(tmp_path / "m1", store, source)
    async with engine.connect() as conn:
        once = await conn.scalar(select(func.count()).select_from(blobs))
    other = RunWorkspaces.create(root=tmp_path / "m1", run_id="run-2", agent_ids=AGENTS, source=source)
    await WorkspaceSync(store, other, SnapshotLimits()).snapshot_source()
    async with engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(blobs)) == once
    await store.drop("run-1")
    async with engine.begin() as conn:  # run-2 still references every one of them
        assert await prune_unused_blobs(conn, unused_since=float("inf")) == 0
    await store.drop("run-2")
    async with engine.begin() as conn:
        assert await prune_unused_blobs(conn, unused_since=0.0) == 0  # used just now: kept
        assert await prune_unused_blobs(conn, unused_since=float("inf")) == once


async def test_over_the_limit_the_snapshot_says_so_and_a_takeover_rebuilds_with_a_notice(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = SqlWorkspaceStore(engine)
    source = make_source(tmp_path / "repo")
    limits = SnapshotLimits(run_bytes=1_000_000, file_bytes=10_000)
    first = await opened(tmp_path / "m1", store, source, limits)
    (first.spaces.path("a0") / "big.bin").write_bytes(b"x" * 20_000)
    (first.spaces.path("a1") / "small.txt").write_text("fits\n")
    await first.checkpoint("a0")
    await first.checkpoint("a1")
    [a0] = [m for m in (await store.load("run-1")).values() if m.space == "a0"]
    assert not a0.complete
    assert "per-file limit" in a0.reason
    assert a0.entries == ()
    await first.checkpoint("a0")  # still over the same limit: nothing written again
    assert (await store.load("run-1"))["a0"].generation == a0.generation

    second = elsewhere(tmp_path / "m2", source, store, limits)
    [rebuilt] = await second.reopen()
    assert rebuilt.agent_id == "a0"
    assert "big.bin" in rebuilt.reason
    assert tree(second.spaces.path("a0")) == tree(second.spaces.snapshot)  # rebuilt from the source
    assert (second.spaces.path("a1") / "small.txt").read_text() == "fits\n"  # the other one restored


async def test_a_source_over_the_run_limit_rebuilds_every_workspace(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = SqlWorkspaceStore(engine)
    source = make_source(tmp_path / "repo")
    limits = SnapshotLimits(run_bytes=100, file_bytes=100)
    first = await opened(tmp_path / "m1", store, source, limits)
    assert first.hashed == 0  # refused by stat: nothing was read
    (first.spaces.path("a0") / "notes.txt").write_text("lost\n")
    await first.checkpoint("a0")

    second = elsewhere(tmp_path / "m2", source, store, limits)
    rebuilt = await second.reopen()
    assert [r.agent_id for r in rebuilt] == list(AGENTS)
    assert "limit" in rebuilt[0].reason
    assert not (second.spaces.path("a0") / "notes.txt").exists()
    assert tree(second.spaces.path("a0")) == tree(source)


async def _hostile(store: SqlWorkspaceStore, *entries: ManifestEntry, blobs: dict[str, bytes]) -> None:
    await store.save(SpaceUpdate(run_id="run-1", space="a0", generation=5, upsert=entries, blobs=blobs))


def _file(path: str, data: bytes) -> ManifestEntry:
    digest = hashlib.sha256(data).hexdigest()
    return ManifestEntry(path=path, kind="file", mode=0o644, size=len(data), digest=digest)


@pytest.mark.parametrize("attack", ["dotdot", "absolute", "through_link", "link_then_dir", "corrupt"])
async def test_a_hostile_manifest_is_refused_and_nothing_is_written_outside(
    engine: AsyncEngine, tmp_path: Path, attack: str
) -> None:
    store = SqlWorkspaceStore(engine)
    await opened(tmp_path / "m1", store, None)
    outside = tmp_path / "outside"
    outside.mkdir()
    data = b"owned\n"
    digest = hashlib.sha256(data).hexdigest()
    link = ManifestEntry(path="a", kind="link", target=str(outside))
    cases = {
        "dotdot": [_file("../../outside/x", data)],
        "absolute": [_file(str(outside / "x"), data)],
        "through_link": [link, _file("a/x", data)],
        "link_then_dir": [link, ManifestEntry(path="a/sub", kind="dir", mode=0o755), _file("a/sub/x", data)],
        "corrupt": [_file("x", data)],
    }
    blobs = {digest: b"something else" if attack == "corrupt" else data}
    await _hostile(store, *cases[attack], blobs=blobs)

    second = elsewhere(tmp_path / "m2", None, store)
    [rebuilt] = await second.reopen()
    assert rebuilt.agent_id == "a0"
    assert "refused" in rebuilt.reason
    assert list(outside.iterdir()) == []
    assert list(second.spaces.path("a0").iterdir()) == []  # rebuilt: an empty workspace, as it began
    assert not (tmp_path / "x").exists()


async def test_a_run_never_snapshotted_is_rebuilt_elsewhere_with_a_notice(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = SqlWorkspaceStore(engine)
    source = make_source(tmp_path / "repo")
    RunWorkspaces.create(root=tmp_path / "m1", run_id="run-1", agent_ids=AGENTS, source=source)
    other = elsewhere(tmp_path / "m2", source, store)
    rebuilt = await other.reopen()
    assert {r.agent_id for r in rebuilt} == set(AGENTS)
    assert tree(other.spaces.path("a1")) == tree(source)


async def test_a_file_name_the_database_cannot_hold_makes_the_snapshot_say_so(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = SqlWorkspaceStore(engine)
    sync = await opened(tmp_path / "m1", store, None)
    (sync.spaces.path("a0") / "ok.txt").write_text("fine\n")
    os.close(os.open(os.fsencode(sync.spaces.path("a0")) + b"/latin1-\xe9.txt", os.O_CREAT | os.O_WRONLY))
    await sync.checkpoint("a0")
    stored = (await store.load("run-1"))["a0"]
    assert not stored.complete
    assert "cannot be stored" in stored.reason
    os.symlink(b"target-\xe9", os.fsencode(sync.spaces.path("a1")) + b"/link")
    await sync.checkpoint("a1")
    assert "cannot be stored" in (await store.load("run-1"))["a1"].reason
