"""Agents' copies of a repository's base tree made ahead of the run, so a run takes each by a rename.

Copying 10,000 files costs seconds on an ext4 disk (~150 µs per created inode) and cannot be
shared: commands write in place, so a hard link would carry one agent's append into the base
tree and every other agent. So the copy moves off the run's start: after a run took its copies, a
background thread makes as many real copies for the next run, under `<name>.trees/.ready/<key>/`
(key: the secret patterns left out). A copy of an older commit is brought to the new tree by
stat comparison (only differing files rewritten, as new inodes), which costs a walk, not a copy.
A copy is owned by whoever renamed it out of the pool (a run or the filler), never two at once.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path

from orchestrator.tools.treecopy import copy_tree, drop_secrets, is_secret_name

log = logging.getLogger(__name__)
MAX_READY = 8  # copies kept per pool


def pool_of(tree: Path, patterns: Sequence[str] | None) -> Path:
    """The pool of ready copies for the repository of base tree `tree`, left-out `patterns`."""
    key = hashlib.sha256("\0".join(patterns or ("<all>",)).encode()).hexdigest()[:16]
    return tree.parent / ".ready" / key


def claim(tree: Path, patterns: Sequence[str] | None, target: Path) -> bool:
    """Move a ready copy to `target`, made equal to `tree`; False when none is ready (copy instead)."""
    pool = pool_of(tree, patterns)
    try:
        names = sorted(p.name for p in pool.iterdir() if not p.name.startswith("."))
    except FileNotFoundError:
        return False
    names.sort(key=lambda name: not name.startswith(f"{tree.name}."))  # this commit's first
    for name in names:
        try:
            (pool / name).rename(target)
        except FileNotFoundError:  # another run took it
            continue
        except OSError:  # another filesystem: a rename cannot move it
            return False
        if not name.startswith(f"{tree.name}."):
            sync_copy(tree, target, patterns)
        return True
    return False


def sync_copy(tree: Path, copy: Path, patterns: Sequence[str] | None) -> None:
    """Make the private `copy` hold what a fresh copy of `tree` (secrets left out) would hold.

    Only files whose kind, bits, size or mtime differ are removed and copied again (new inodes in
    `copy`; `tree` is only read). A folder left empty goes, as git trees have none.
    """
    want = _wanted(str(tree), tuple(patterns or ()))
    have = _stats(str(copy))
    for rel, info in have.items():
        if want.get(rel) != info:
            (copy / rel).unlink()
    for folder, _dirs, _files in os.walk(copy, topdown=False):  # children first: emptied in turn
        if folder != str(copy) and not os.listdir(folder):
            os.rmdir(folder)
    for rel, info in want.items():
        if have.get(rel) == info:
            continue
        parent = (copy / rel).parent
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            parent.unlink()
        parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / rel, copy / rel, follow_symlinks=False)


@functools.lru_cache(maxsize=4)
def _wanted(tree: str, patterns: tuple[str, ...]) -> dict[str, tuple[int, int, int]]:
    """What a copy of the (immutable) tree holds; cached, as every agent of a run asks for it."""
    return {rel: info for rel, info in _stats(tree).items() if not _secret(rel, patterns)}


def _stats(top: str) -> dict[str, tuple[int, int, int]]:
    """(mode, size, mtime) of every file and link by relative path: `file_stats` without `Path` costs."""
    found: dict[str, tuple[int, int, int]] = {}
    stack = [("", top)]
    while stack:
        prefix, folder = stack.pop()
        with os.scandir(folder) as items:
            for item in items:
                info = item.stat(follow_symlinks=False)
                rel = prefix + item.name
                if stat.S_ISDIR(info.st_mode):
                    if item.name != ".git":
                        stack.append((rel + "/", item.path))
                elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                    found[rel] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


def _secret(rel: str, patterns: Sequence[str] | None) -> bool:
    return bool(patterns) and any(is_secret_name(part, patterns or ()) for part in rel.split("/"))


def fill(tree: Path, patterns: Sequence[str] | None, count: int) -> None:
    """Have `count` copies of `tree` ready (at most MAX_READY); skipped while another fill runs."""
    pool = pool_of(tree, patterns)
    pool.mkdir(parents=True, exist_ok=True)
    with open(pool / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        for stale in pool.glob(".making-*"):  # a fill that died: only fills make these, under the lock
            shutil.rmtree(stale, ignore_errors=True)
        ready = sorted(p for p in pool.iterdir() if not p.name.startswith("."))
        current = [p for p in ready if p.name.startswith(f"{tree.name}.")]
        older = [p for p in ready if p not in current]
        for _ in range(min(count, MAX_READY) - len(current)):
            making = pool / f".making-{uuid.uuid4().hex}"
            if older:
                older.pop().rename(making)
                sync_copy(tree, making, patterns)
            else:
                copy_tree(tree, making)
                if patterns:
                    drop_secrets(making, patterns)
            making.rename(pool / f"{tree.name}.{uuid.uuid4().hex}")
        for extra in older:
            shutil.rmtree(extra, ignore_errors=True)


def fill_in_background(tree: Path, patterns: Sequence[str] | None, count: int) -> threading.Thread:
    """Start `fill` on a daemon thread (a failure is logged: the next run copies instead)."""

    def run() -> None:
        try:
            fill(tree, patterns, count)
        except OSError:
            log.warning("could not make ready copies of %s", tree, exc_info=True)

    thread = threading.Thread(target=run, name=f"ready-copies-{tree.name[:8]}", daemon=True)
    thread.start()
    return thread
