"""A workspace as a manifest (path → kind, mode, size, mtime, sha256 or link text) and back again.

`scan` lists a tree by `lstat` (links never followed, `.git` included: a restored workspace is the
whole directory); `entries` turns a scan into manifest entries, reading and hashing only files
whose stat differs from what a cache (the last checkpoint, or the source's manifest) already knows;
`delta` is an agent's tree as the differences from the source's manifest. `restore` writes a
manifest into an empty directory and treats it as untrusted input: every path is one relative
POSIX path without `.`/`..`, the finished tree must not put anything under a link or a file, every
directory is opened with `O_NOFOLLOW` relative to its parent, links are made last, and every blob
must hash to its name. Mtimes are restored too, so the stat-based diff stays cheap after a restore.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import WorkspaceError
from orchestrator.ports import ManifestEntry

MAX_PATH = 1024  # longer paths are not snapshotted (the snapshot says so)
_PERMS = 0o777  # setuid/setgid/sticky bits are not restored
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

StatKey = tuple[str, int, int, int]  # kind, permission bits, size, mtime_ns


@dataclass(slots=True)
class Scanned:
    """One checkpoint's view of a tree: its entries, the bytes of the files it read, what it read."""

    entries: dict[str, ManifestEntry]
    blobs: dict[str, bytes]
    hashed: int = 0


def scan(top: Path) -> dict[str, os.stat_result]:
    """(relative path → lstat) of every directory, file and symlink under `top` (sockets etc. skipped)."""
    found: dict[str, os.stat_result] = {}
    _walk(os.fspath(top), "", found)
    return found


def _walk(directory: str, prefix: str, found: dict[str, os.stat_result]) -> None:
    # Plain strings, not pathlib: the walk is most of a checkpoint's cost on a large tree.
    try:
        items = list(os.scandir(directory))
    except FileNotFoundError:
        return
    for item in items:
        info = item.stat(follow_symlinks=False)
        rel = prefix + item.name
        if stat.S_ISDIR(info.st_mode):
            found[rel] = info
            _walk(item.path, rel + "/", found)
        elif stat.S_ISLNK(info.st_mode) or stat.S_ISREG(info.st_mode):
            found[rel] = info


def stat_key(info: os.stat_result) -> StatKey:
    """What says a file is unchanged without reading it (the kind, mode, size and mtime)."""
    return (_kind(info), stat.S_IMODE(info.st_mode) & _PERMS, info.st_size, info.st_mtime_ns)


def entry_key(entry: ManifestEntry) -> StatKey:
    """The stat key a file restored from `entry` has."""
    return (entry.kind, entry.mode, entry.size, entry.mtime_ns)


def _kind(info: os.stat_result) -> str:
    return "dir" if stat.S_ISDIR(info.st_mode) else "link" if stat.S_ISLNK(info.st_mode) else "file"


def entries(top: Path, stats: Mapping[str, os.stat_result], known: Mapping[str, ManifestEntry]) -> Scanned:
    """Manifest entries of a scanned tree; files whose stat matches `known` are not read again."""
    out = Scanned(entries={}, blobs={})
    for rel, info in stats.items():
        kind = _kind(info)
        mode = stat.S_IMODE(info.st_mode) & _PERMS
        if kind == "dir":
            out.entries[rel] = ManifestEntry(path=rel, kind="dir", mode=mode)
            continue
        if kind == "link":
            target = os.readlink(top / rel)
            out.entries[rel] = ManifestEntry(
                path=rel, kind="link", mode=mode, mtime_ns=info.st_mtime_ns, target=target
            )
            continue
        cached = known.get(rel)
        if cached is not None and cached.digest is not None and entry_key(cached) == stat_key(info):
            out.entries[rel] = cached
            continue
        data = read_file(top / rel)
        digest = hashlib.sha256(data).hexdigest()
        out.hashed += 1
        out.blobs[digest] = data
        out.entries[rel] = ManifestEntry(
            path=rel, kind="file", mode=mode, size=len(data), mtime_ns=info.st_mtime_ns, digest=digest
        )
    return out


def read_file(path: Path) -> bytes:
    """A file's bytes; a file swapped for a link since the scan is refused, not followed."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as handle:
        return handle.read()


def same_content(a: ManifestEntry, b: ManifestEntry) -> bool:
    """Equal but for the mtime (a touched file, a directory written into)."""
    return (a.kind, a.mode, a.digest, a.target) == (b.kind, b.mode, b.digest, b.target)


def delta(tree: Mapping[str, ManifestEntry], base: Mapping[str, ManifestEntry]) -> dict[str, ManifestEntry]:
    """The tree as the changes from `base`: what differs or is new, and a `gone` entry per removal."""
    changed = {
        rel: entry for rel, entry in tree.items() if rel not in base or not same_content(base[rel], entry)
    }
    for rel in base.keys() - tree.keys():
        changed[rel] = ManifestEntry(path=rel, kind="gone")
    return changed


def overlay(
    base: Mapping[str, ManifestEntry], changes: Mapping[str, ManifestEntry]
) -> dict[str, ManifestEntry]:
    """`base` with `changes` applied (the tree a delta describes)."""
    tree = dict(base)
    for rel, entry in changes.items():
        if entry.kind == "gone":
            tree.pop(rel, None)
        else:
            tree[rel] = entry
    return tree


def check_tree(tree: Mapping[str, ManifestEntry]) -> None:
    """Refuse a tree that cannot be written safely: bad paths, or anything under a link or a file."""
    for rel, entry in tree.items():
        check_path(rel)
        if entry.path != rel or entry.kind not in ("file", "link", "dir"):
            raise WorkspaceError(f"refusing a snapshot entry {rel!r} of kind {entry.kind!r}")
        if entry.kind == "file" and (entry.digest is None or len(entry.digest) != 64):
            raise WorkspaceError(f"refusing a snapshot file {rel!r} without its sha256")
        if entry.kind == "link" and not entry.target:
            raise WorkspaceError(f"refusing a snapshot link {rel!r} without a target")
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            parent = tree.get("/".join(parts[:depth]))
            if parent is not None and parent.kind != "dir":
                raise WorkspaceError(f"refusing a snapshot that writes {rel!r} through a {parent.kind}")


def check_path(rel: str) -> None:
    """One relative POSIX path inside the workspace: no `/` start, no empty, `.` or `..` part, no NUL."""
    parts = rel.split("/")
    if not rel or len(rel) > MAX_PATH or "\x00" in rel or any(p in ("", ".", "..") for p in parts):
        raise WorkspaceError(f"refusing a snapshot path {rel!r} outside the workspace")


def restore(top: Path, tree: Mapping[str, ManifestEntry], blobs: Mapping[str, bytes]) -> None:
    """Write `tree` into the new, empty directory `top` (which must not exist yet)."""
    check_tree(tree)
    for entry in tree.values():
        if entry.kind == "file" and entry.digest is not None:
            data = blobs.get(entry.digest)
            if data is None or hashlib.sha256(data).hexdigest() != entry.digest:
                raise WorkspaceError(f"the snapshot's content of {entry.path!r} is missing or corrupt")
    top.mkdir(mode=0o700)
    dirs = _Dirs(os.open(top, _DIR_FLAGS))
    try:
        ordered = sorted(tree.values(), key=lambda e: e.path)
        for entry in ordered:  # directories and files first: no link exists while anything is written
            if entry.kind == "dir":
                dirs.get(entry.path, create=True)
            elif entry.kind == "file":
                _write_file(dirs, entry, blobs[entry.digest or ""])
        for entry in ordered:
            if entry.kind == "link":
                _make_link(dirs, entry)
        for entry in reversed(ordered):  # modes last, deepest first: a read-only directory stays writable
            if entry.kind == "dir":
                os.fchmod(dirs.get(entry.path, create=False), entry.mode)
        os.fchmod(dirs.root, 0o755)
    finally:
        dirs.close()


class _Dirs:
    """The open directories of one restore by relative path, each opened from its parent, links refused."""

    def __init__(self, root: int) -> None:
        self.root = root
        self._open: dict[str, int] = {"": root}

    def get(self, rel: str, *, create: bool) -> int:
        fd = self._open.get(rel)
        if fd is not None:
            return fd
        head, _, name = rel.rpartition("/")
        parent = self.get(head, create=create)
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=parent)
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise WorkspaceError(f"refusing to restore through {rel!r}: {exc.strerror}") from exc
        self._open[rel] = fd
        return fd

    def parent(self, rel: str) -> tuple[int, str]:
        head, _, name = rel.rpartition("/")
        return self.get(head, create=True), name

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()


def _write_file(dirs: _Dirs, entry: ManifestEntry, data: bytes) -> None:
    parent, name = dirs.parent(entry.path)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=parent)
        try:
            _write_all(fd, data)
            os.fchmod(fd, entry.mode)
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
        finally:
            os.close(fd)
    except OSError as exc:
        raise WorkspaceError(f"could not restore {entry.path!r}: {exc.strerror}") from exc


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _make_link(dirs: _Dirs, entry: ManifestEntry) -> None:
    parent, name = dirs.parent(entry.path)
    try:
        os.symlink(entry.target or "", name, dir_fd=parent)
        os.utime(name, ns=(entry.mtime_ns, entry.mtime_ns), dir_fd=parent, follow_symlinks=False)
    except OSError as exc:
        raise WorkspaceError(f"could not restore the link {entry.path!r}: {exc.strerror}") from exc


def remove_tree(path: Path) -> None:
    """Remove a directory tree (links not followed), including one left read-only."""
    if not path.exists() and not path.is_symlink():
        return
    for current, dirs, _files in os.walk(path):
        for name in dirs:
            sub = Path(current) / name
            if not sub.is_symlink():
                sub.chmod(0o700)
    path.chmod(0o700)
    shutil.rmtree(path)


def file_sizes(stats: Mapping[str, os.stat_result]) -> Iterator[tuple[str, int]]:
    """(path, size) of every regular file of a scan."""
    for rel, info in stats.items():
        if stat.S_ISREG(info.st_mode):
            yield rel, info.st_size
