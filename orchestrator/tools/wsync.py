"""Workspaces that survive the machine: a run's workspaces checkpointed into a `WorkspaceStore`.

The run's `.source` copy is stored whole at the start (generation 1); each agent's workspace is
stored as its differences from it, after every tool call that may have written files and when the
run parks. A checkpoint scans by `lstat` and reads only files whose stat changed since the last
one, so a large, mostly untouched repository costs a directory walk. A run resumed on a machine
whose copy is missing, or older than the stored generation (the marker file records what this
disk holds), gets every workspace back byte for byte. Over a limit (run total or one file) the
snapshot says so instead of storing a part, and a takeover rebuilds that workspace from the source
with a notice the run records, as it does when a stored manifest is refused as unsafe.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import WorkspaceError
from orchestrator.ports import ManifestEntry, SpaceManifest, SpaceUpdate, WorkspaceStore
from orchestrator.tools import snapshot
from orchestrator.tools.workspace import RunWorkspaces, copy_tree

log = logging.getLogger(__name__)

SOURCE_SPACE = ".source"
# A file modified this close before a scan may be modified again within the same timestamp tick
# (coarse file-system clocks), unseen by its stat: it is read again at the next checkpoint.
_RACY_NS = 2_000_000_000
MARKER = ".massgen-snapshot.json"  # in the run's directory: the generation of each space on this disk
_MB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotLimits:
    """How much of a run's workspaces the store keeps: in all (distinct blobs) and per file."""

    run_bytes: int = 256 * _MB
    file_bytes: int = 32 * _MB


DEFAULT_LIMITS = SnapshotLimits()


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """A workspace that could not be restored and was rebuilt from the source: the agent's files are gone."""

    agent_id: str
    reason: str


class WorkspaceSync:
    """The checkpoints and the restore of one run's workspaces."""

    def __init__(self, store: WorkspaceStore, spaces: RunWorkspaces, limits: SnapshotLimits) -> None:
        self.store = store
        self.spaces = spaces
        self.limits = limits
        self.hashed = 0  # files read and hashed by checkpoints (what "cheap" is measured in)
        self._stored: dict[str, dict[str, ManifestEntry]] = {}  # per space, what the store holds
        self._complete: dict[str, bool] = {}
        self._reasons: dict[str, str] = {}  # spaces stored as incomplete, and why
        self._generation: dict[str, int] = {}
        self._known: dict[str, dict[str, ManifestEntry]] = {}  # per space, its tree at the last checkpoint
        self._replace: set[str] = set()  # spaces whose stored rows no longer describe the disk
        self._racy: dict[str, set[str]] = {}  # per space, files too recent to trust their stat
        self._stored_any = False  # the store holds something of this run (else `drop` has nothing to do)
        self._locks = {space: asyncio.Lock() for space in (SOURCE_SPACE, *spaces.agent_ids)}

    @property
    def _has_source(self) -> bool:
        return self.spaces.source is not None

    def _top(self, space: str) -> Path:
        return self.spaces.snapshot if space == SOURCE_SPACE else self.spaces.path(space)

    def _base(self) -> dict[str, ManifestEntry]:
        return self._known.get(SOURCE_SPACE, {}) if self._has_source else {}

    # ---- checkpoints -------------------------------------------------------------------------

    async def snapshot_source(self) -> None:
        """The first checkpoint of a new run: the source copy, whole."""
        if self._has_source:
            await self.checkpoint(SOURCE_SPACE)
        else:
            await asyncio.to_thread(self._write_marker)

    async def checkpoint(self, space: str) -> None:
        """Store what changed in one workspace since its last checkpoint; a failure is logged, not raised."""
        try:
            if space != SOURCE_SPACE and self._has_source and SOURCE_SPACE not in self._generation:
                await self.checkpoint(SOURCE_SPACE)  # the source's own save failed earlier: first that
                if SOURCE_SPACE not in self._generation:
                    return
            async with self._locks[space]:
                await self._checkpoint(space)
        except Exception:
            log.exception("run %s: checkpoint of workspace %s failed", self.spaces.run_dir.name, space)

    async def checkpoint_all(self) -> None:
        """A checkpoint of every agent's workspace (the run parks)."""
        for agent_id in self.spaces.agent_ids:
            await self.checkpoint(agent_id)

    async def _checkpoint(self, space: str) -> None:
        if space != SOURCE_SPACE and self._has_source and not self._complete.get(SOURCE_SPACE, False):
            return  # the source is not stored: a takeover rebuilds from it whatever the agents stored
        top = self._top(space)
        cache = self._known.get(space) or self._base()
        racy = self._racy.get(space, set())
        if racy:
            cache = {rel: e for rel, e in cache.items() if rel not in racy}
        scan_ns = time.time_ns()
        scanned, reason = await asyncio.to_thread(self._measure, space, top, cache)
        if scanned is not None:
            self._racy[space] = {
                rel
                for rel, e in scanned.entries.items()
                if e.kind == "file" and e.mtime_ns > scan_ns - _RACY_NS
            }
        if scanned is not None:
            self.hashed += scanned.hashed
            tree = scanned.entries
            wanted = tree if space == SOURCE_SPACE else snapshot.delta(tree, self._base())
            total = self._bytes_without(space) | _digest_sizes(wanted.values())
            if sum(total.values()) > self.limits.run_bytes:
                scanned, reason = None, self._over_run(sum(total.values()))
        if scanned is None:
            if self._reasons.get(space) == reason and space not in self._replace:
                return  # still over the same limit: already stored as such
            update = SpaceUpdate(
                run_id=self._run_id,
                space=space,
                generation=self._generation.get(space, 0) + 1,
                complete=False,
                reason=reason,
                replace=True,
            )
            await self.store.save(update)
            self._saved(space, {}, complete=False, generation=update.generation)
            self._reasons[space] = reason
            return
        await self._save_changes(space, top, wanted, scanned)
        self._known[space] = scanned.entries

    async def _save_changes(
        self, space: str, top: Path, wanted: dict[str, ManifestEntry], scanned: snapshot.Scanned
    ) -> None:
        replace = space in self._replace or not self._complete.get(space, True)
        before = {} if replace else self._stored.get(space, {})
        upsert = tuple(e for rel, e in wanted.items() if before.get(rel) != e)
        remove = tuple(rel for rel in before if rel not in wanted)
        if not (upsert or remove or replace) and space in self._generation:
            return  # nothing changed: nothing to write
        digests = {e.digest for e in upsert if e.digest is not None}
        lacking = await self.store.missing(digests)
        blobs = {d: scanned.blobs[d] for d in lacking if d in scanned.blobs}
        for entry in upsert:  # known by stat but absent from the store (pruned): read it again
            if entry.digest in lacking and entry.digest not in blobs:
                data = await asyncio.to_thread(snapshot.read_file, top / entry.path)
                if hashlib.sha256(data).hexdigest() != entry.digest:
                    raise WorkspaceError(f"{entry.path} changed while it was being stored")
                blobs[entry.digest] = data
        generation = self._generation.get(space, 0) + 1
        update = SpaceUpdate(
            run_id=self._run_id,
            space=space,
            generation=generation,
            upsert=upsert,
            remove=remove,
            replace=replace,
            blobs=blobs,
        )
        await self.store.save(update)
        self._saved(space, wanted, complete=True, generation=generation)

    def _saved(
        self, space: str, entries: dict[str, ManifestEntry], *, complete: bool, generation: int
    ) -> None:
        self._stored_any = True
        self._reasons.pop(space, None)
        self._stored[space] = entries
        self._complete[space] = complete
        self._generation[space] = generation
        self._replace.discard(space)
        self._write_marker()

    def _measure(
        self, space: str, top: Path, cache: dict[str, ManifestEntry]
    ) -> tuple[snapshot.Scanned | None, str]:
        """Scan and hash what changed, or say which limit it is over (before reading anything big)."""
        stats = snapshot.scan(top)
        unread = 0
        for rel, info in stats.items():
            if len(rel) > snapshot.MAX_PATH:
                return None, f"a path is longer than {snapshot.MAX_PATH} characters"
            if not rel.isprintable() or not _utf8(rel):
                return None, f"a file name cannot be stored: {rel.encode(errors='backslashreplace')!r}"
            if not stat.S_ISREG(info.st_mode):
                continue
            if info.st_size > self.limits.file_bytes:
                return (
                    None,
                    f"{rel} is {_mb(info.st_size)}, over the per-file limit of {_mb(self.limits.file_bytes)}",
                )
            known = cache.get(rel)
            if known is None or snapshot.entry_key(known) != snapshot.stat_key(info):
                unread += info.st_size
        already = sum(self._bytes_without(space).values())
        if already + unread > self.limits.run_bytes:
            return None, self._over_run(already + unread)
        scanned = snapshot.entries(top, stats, cache)
        for entry in scanned.entries.values():
            if entry.target is not None and not _utf8(entry.target):
                return None, f"the link {entry.path} has a target that cannot be stored"
        return scanned, ""

    def _over_run(self, size: int) -> str:
        return (
            f"the workspaces hold {_mb(size)}, over the run's snapshot limit of {_mb(self.limits.run_bytes)}"
        )

    def _bytes_without(self, space: str) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for other, entries in self._stored.items():
            if other != space:
                sizes |= _digest_sizes(entries.values())
        return sizes

    @property
    def _run_id(self) -> str:
        return self.spaces.run_dir.name

    # ---- restore -----------------------------------------------------------------------------

    async def reopen(self) -> list[Rebuilt]:
        """Bring this disk up to the stored snapshot: restore what is missing or stale, rebuild the rest."""
        stored = await self.store.load(self._run_id)
        if not stored:  # never snapshotted (a run from before the store): as the workspaces are
            existed = await asyncio.to_thread(self._on_disk)
            await asyncio.to_thread(
                RunWorkspaces.reopen,
                root=self.spaces.root,
                run_id=self._run_id,
                agent_ids=self.spaces.agent_ids,
                source=self.spaces.source,
            )
            await self.snapshot_source()
            if existed:
                return []
            return [
                Rebuilt(a, "no snapshot of this run's workspaces was stored") for a in self.spaces.agent_ids
            ]
        self._stored_any = True
        for space, manifest in stored.items():
            self._stored[space] = {e.path: e for e in manifest.entries}
            self._complete[space] = manifest.complete
            self._generation[space] = manifest.generation
            if not manifest.complete:
                self._reasons[space] = manifest.reason
        if SOURCE_SPACE in stored and stored[SOURCE_SPACE].complete:
            self._known[SOURCE_SPACE] = self._stored[SOURCE_SPACE]
        on_disk = await asyncio.to_thread(self._read_marker)
        lost = await self._reopen_source(stored.get(SOURCE_SPACE), on_disk)
        if lost is not None:
            return await self._rebuild_all(lost)
        rebuilt: list[Rebuilt] = []
        for agent_id in self.spaces.agent_ids:
            if self._stale(agent_id, on_disk):
                reason = await self._restore_agent(agent_id, stored.get(agent_id))
                if reason is not None:
                    rebuilt.append(Rebuilt(agent_id, reason))
            else:
                self._known[agent_id] = snapshot.overlay(self._base(), self._stored.get(agent_id, {}))
        await asyncio.to_thread(self._write_marker)
        for item in rebuilt:
            await self.checkpoint(item.agent_id)
        return rebuilt

    async def _reopen_source(self, manifest: SpaceManifest | None, on_disk: dict[str, int]) -> str | None:
        """Restore the source copy if it is stale; why it cannot be, or None."""
        await asyncio.to_thread(self.spaces.run_dir.mkdir, parents=True, exist_ok=True)
        if not self._has_source or not self._stale(SOURCE_SPACE, on_disk):
            return None
        if manifest is None or not manifest.complete:
            return manifest.reason if manifest is not None else "the source's snapshot was never stored"
        tree = self._stored[SOURCE_SPACE]
        try:
            await self._restore(self.spaces.snapshot, tree)
        except WorkspaceError as exc:
            return f"its snapshot was refused: {exc}"
        self._known[SOURCE_SPACE] = tree
        return None

    async def _restore_agent(self, agent_id: str, manifest: SpaceManifest | None) -> str | None:
        top = self.spaces.path(agent_id)
        await asyncio.to_thread(snapshot.remove_tree, top)
        if manifest is None:  # never changed: a copy of the source is exact
            await asyncio.to_thread(self._fresh, agent_id)
            return None
        if not manifest.complete:
            reason = manifest.reason
        else:
            tree = snapshot.overlay(self._base(), self._stored[agent_id])
            try:
                await self._restore(top, tree)
            except WorkspaceError as exc:
                reason = f"its snapshot was refused: {exc}"
            else:
                self._known[agent_id] = tree
                return None
        await asyncio.to_thread(snapshot.remove_tree, top)
        await asyncio.to_thread(self._fresh, agent_id)
        self._replace.add(agent_id)
        return reason

    async def _restore(self, top: Path, tree: dict[str, ManifestEntry]) -> None:
        snapshot.check_tree(tree)  # before any blob is fetched
        digests = {e.digest for e in tree.values() if e.kind == "file" and e.digest is not None}
        blobs = await self.store.blobs(digests)
        await asyncio.to_thread(snapshot.remove_tree, top)
        try:
            await asyncio.to_thread(snapshot.restore, top, tree, blobs)
        except WorkspaceError:
            await asyncio.to_thread(snapshot.remove_tree, top)
            raise

    async def _rebuild_all(self, reason: str) -> list[Rebuilt]:
        def rebuild() -> None:
            self.spaces.close()
            RunWorkspaces.create(
                root=self.spaces.root,
                run_id=self._run_id,
                agent_ids=self.spaces.agent_ids,
                source=self.spaces.source,
            )

        await asyncio.to_thread(rebuild)
        self._known.clear()
        self._replace.update(self._locks)
        await self.snapshot_source()
        for agent_id in self.spaces.agent_ids:
            if agent_id in self._stored:
                await self.checkpoint(agent_id)
        return [Rebuilt(agent_id, reason) for agent_id in self.spaces.agent_ids]

    def _fresh(self, agent_id: str) -> None:
        top = self.spaces.path(agent_id)
        if self._has_source:
            copy_tree(self.spaces.snapshot, top)
        else:
            top.mkdir()
        self._known[agent_id] = dict(self._base())

    def _stale(self, space: str, on_disk: dict[str, int]) -> bool:
        return not self._top(space).is_dir() or on_disk.get(space, 0) < self._generation.get(space, 0)

    def _on_disk(self) -> bool:
        return self.spaces.run_dir.is_dir() and (not self._has_source or self.spaces.snapshot.is_dir())

    def _read_marker(self) -> dict[str, int]:
        try:
            raw = json.loads((self.spaces.run_dir / MARKER).read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(raw, dict):
            return {}
        return {str(k): v for k, v in raw.items() if isinstance(v, int)}

    def _write_marker(self) -> None:
        path = self.spaces.run_dir / MARKER
        if not self.spaces.run_dir.is_dir():
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._generation, sort_keys=True))
        os.replace(tmp, path)

    async def drop(self) -> None:
        """The run ended: its manifests go (the retention sweep prunes blobs nothing uses)."""
        if not self._stored_any:
            return
        try:
            await self.store.drop(self._run_id)
        except Exception:
            log.exception("run %s: could not drop its workspace snapshots", self._run_id)


def _digest_sizes(entries: Iterable[ManifestEntry]) -> dict[str, int]:
    out: dict[str, int] = {}
    for entry in entries:
        if entry.digest is not None:
            out[entry.digest] = entry.size
    return out


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:  # a name that is not UTF-8 (surrogate-escaped by os.scandir)
        return False
    return True


def _mb(size: int) -> str:
    return f"{size / _MB:.1f} MB"
