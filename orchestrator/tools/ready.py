"""Agents' copies of a repository's base tree made ahead of the run, so a run takes each by a rename.

Copying 10,000 files costs seconds on an ext4 disk (~150 µs per created inode) and cannot be
shared: commands write in place, so a hard link would carry one agent's append into the base
tree and every other agent. So the copy moves off the run's start: after a run took its copies, a
background thread makes as many real copies for the next run, under `<name>.trees/.ready/<key>/`
(key: the secret patterns left out), each named `<commit>.<random>`, and the next run's `.source`
snapshot (hard links of the tree, secrets left out: `<commit>.<random>.links`), so the run's start
makes no file at all on an unchanged base.

A copy of an older commit is brought to the new tree by the paths the two commits differ in, as
the bot's mirror lists them (`git diff` on trusted state): only those are removed and copied again
(new inodes), so a run after a new commit does work in the size of the change, not of the tree.
That holds because a pool copy is exactly its commit's tree: only the filler writes it, and a copy
is owned by whoever renamed it out of the pool (a run or the filler), never two at once. When the
mirror cannot say (the old commit gone), the copy is compared by file stats instead (a walk).

Pools are tidied at every fill: what a crashed filler left (`.making-*`, `.gone-*`) goes, and a
pool nobody took from or filled for IDLE_S, or beyond the newest MAX_POOLS, is removed whole.
Anything removed is first renamed out of the pool, so a run never takes a half-deleted copy.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import re
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from orchestrator.repos.trusted_git import GitError, plain_tree_path, run_git, through_link
from orchestrator.tools.treecopy import copy_tree, drop_secrets, is_secret_name

log = logging.getLogger(__name__)
MAX_READY = 8  # copies kept per pool
MAX_POOLS = 3  # pools kept per repository (one per set of secret patterns in use)
IDLE_S = 24 * 3600.0  # a pool nobody took from or filled for this long is removed
_LEFTOVERS = (".making-", ".gone-")  # names only a filler makes, under its pool's lock
_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
Change = tuple[str, str]  # (git status letter, path relative to the tree)


def pool_of(tree: Path, patterns: Sequence[str] | None) -> Path:
    """The pool of ready copies for the repository of base tree `tree`, left-out `patterns`."""
    key = hashlib.sha256("\0".join(patterns or ("<all>",)).encode()).hexdigest()[:16]
    return tree.parent / ".ready" / key


def claim(tree: Path, patterns: Sequence[str] | None, target: Path, *, links: bool = False) -> bool:
    """Move a ready copy to `target`, made equal to `tree`; False when none is ready (copy instead).

    `links`: the run's read-only snapshot of the tree (hard links, `cp -al`) instead of a copy.
    """
    pool = pool_of(tree, patterns)
    try:
        names = sorted(p.name for p in pool.iterdir() if _kind(p.name) == links)
        os.utime(pool)  # in use: kept by the tidying
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
        bring(tree, target, name.partition(".")[0], patterns, links=links)
        return True
    return False


def _kind(name: str) -> bool | None:
    """None for the pool's own files, else whether a ready entry is a snapshot of links."""
    return None if name.startswith(".") else name.endswith(".links")


def bring(
    tree: Path, copy: Path, commit: str, patterns: Sequence[str] | None, *, links: bool = False
) -> None:
    """Make `copy`, an exact copy of `commit`'s tree (secrets left out), a copy of `tree`.

    `links`: `copy` is a snapshot of hard links, and the changed files are linked, not copied.
    """
    if commit == tree.name:
        return
    changes = changed_paths(tree, commit)
    if changes is None:
        sync_copy(tree, copy, patterns)
        return
    for _status, rel in changes:
        _remove(copy, rel)
    for status, rel in changes:
        if status != "D" and not _secret(rel, patterns):
            _put(copy, tree, rel, link=links)


@functools.lru_cache(maxsize=8)
def changed_paths(tree: Path, commit: str) -> tuple[Change, ...] | None:
    """Every path base tree `tree` differs in from `commit`, per the mirror it was checked out from.

    None when the mirror cannot say (no mirror beside the trees, the commit gone, a path git
    cannot give as UTF-8): the caller compares stats instead. Cached: every agent asks.
    """
    mirror = tree.parent.with_name(tree.parent.name.removesuffix(".trees") + ".git")  # `RepoCache`
    if not all(_COMMIT.fullmatch(name) for name in (commit, tree.name)):  # never an option to git
        return None
    try:
        listed = run_git(
            ["diff", "--name-status", "--no-renames", "-z", commit, tree.name, "--"],
            cwd=tree.parent,
            git_dir=mirror,
        )
    except (GitError, OSError):
        return None
    fields = listed.split("\0")[:-1]
    if len(fields) % 2 or "\ufffd" in listed:
        return None
    changes = tuple(zip(fields[0::2], fields[1::2], strict=True))
    return changes if all(plain_tree_path(rel) for _status, rel in changes) else None


def _remove(copy: Path, rel: str) -> None:
    """Remove `rel` from `copy` (never through a link), then the folders that left empty."""
    target = copy / rel
    if through_link(copy, rel):  # not a file of the copy: the link itself is in the change list
        return
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    parent = target.parent
    while parent != copy:
        try:
            parent.rmdir()
        except OSError:  # not empty (or gone)
            break
        parent = parent.parent


def _put(copy: Path, tree: Path, rel: str, *, link: bool) -> None:
    """Copy one file or link of the tree as a new inode (mtime kept, as `cp -a` does), or link it."""
    source, target = tree / rel, copy / rel
    if through_link(copy, rel):  # the copy was not its commit's tree: never write through a link
        raise OSError(f"ready copy {copy} has a link on the way to {rel}")
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir() and not source.is_symlink():  # a submodule: checked out as an empty folder
        target.mkdir(exist_ok=True)
    elif link:
        os.link(source, target, follow_symlinks=False)  # a symlink is linked as itself, as `cp -al` does
    else:
        shutil.copy2(source, target, follow_symlinks=False)


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
    """Have `count` copies (at most MAX_READY) and one snapshot of `tree` ready; skipped if a fill runs."""
    pool = pool_of(tree, patterns)
    pool.mkdir(parents=True, exist_ok=True)
    try:
        tidy(pool.parent, keep=pool, now=time.time())
    except OSError:  # another process tidying at once: the next fill tries again
        log.warning("could not tidy the ready copies under %s", pool.parent, exc_info=True)
    with _locked(pool) as mine:
        if not mine:
            return
        os.utime(pool)
        _drop_leftovers(pool)
        _fill_kind(tree, patterns, min(count, MAX_READY), pool, links=False)
        _fill_kind(tree, patterns, 1, pool, links=True)


def _fill_kind(tree: Path, patterns: Sequence[str] | None, count: int, pool: Path, *, links: bool) -> None:
    """Have `count` copies (or snapshots, `links`) of `tree` in `pool`, older ones brought or removed."""
    ready = sorted(p for p in pool.iterdir() if _kind(p.name) == links)
    current = [p for p in ready if p.name.startswith(f"{tree.name}.")]
    older = [p for p in ready if p not in current]
    for _ in range(count - len(current)):
        making = pool / f".making-{uuid.uuid4().hex}"
        commit = _reuse(older, making)
        if commit is not None:
            bring(tree, making, commit, patterns, links=links)
        else:
            copy_tree(tree, making, link=links)
            if patterns:
                drop_secrets(making, patterns)
        making.rename(pool / f"{tree.name}.{uuid.uuid4().hex}{'.links' if links else ''}")
    for extra in older:
        _discard(extra, pool)


def _reuse(older: list[Path], making: Path) -> str | None:
    """Rename one of the `older` copies to `making`; its commit, or None when runs took them all."""
    while older:
        old = older.pop()
        try:
            old.rename(making)
        except FileNotFoundError:  # a run took it meanwhile
            continue
        return old.name.partition(".")[0]
    return None


def tidy(ready_root: Path, *, now: float, keep: Path | None = None) -> list[Path]:
    """Remove crash leftovers and unused pools under `.ready/` (never `keep`); the pools removed.

    A pool whose lock is held (a fill at work, in any process) is left alone; one last used more
    than IDLE_S ago, or beyond the newest MAX_POOLS (`keep` counted), is removed whole.
    """
    for leftover in ready_root.glob(".gone-*"):  # a tidying that died midway
        shutil.rmtree(leftover, ignore_errors=True)
    others = sorted(
        (p for p in ready_root.iterdir() if p != keep and p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    removed: list[Path] = []
    for rank, pool in enumerate(others):
        with _locked(pool) as mine:
            if not mine:
                continue
            if rank < MAX_POOLS - (keep is not None) and now - pool.stat().st_mtime < IDLE_S:
                _drop_leftovers(pool)
                continue
            gone = ready_root / f".gone-{uuid.uuid4().hex}"
            pool.rename(gone)  # atomically out of reach of a claim, then removed
        shutil.rmtree(gone, ignore_errors=True)
        removed.append(pool)
    return removed


def tidy_ready_copies(repos_root: Path, *, now: float | None = None) -> int:
    """`tidy` every repository's pools under the bot's repository cache, at start-up; pools removed.

    A refill tidies its own repository's pools; this is for the ones no run asks for any more (a
    repository dropped from the configuration, a base no run is on), and what a killed process left.
    """
    when = time.time() if now is None else now
    removed = 0
    for ready_root in sorted(repos_root.glob("*.trees/.ready")):
        try:
            removed += len(tidy(ready_root, now=when))
        except OSError:
            log.warning("could not tidy the ready copies under %s", ready_root, exc_info=True)
    return removed


@contextmanager
def _locked(pool: Path) -> Iterator[bool]:
    """The pool's fill lock, without waiting: True when held (released, also by a crash, after)."""
    with open(pool / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def _drop_leftovers(pool: Path) -> None:
    """Remove what a filler that died left (only fills make these names, under the lock)."""
    for entry in pool.iterdir():
        if entry.name.startswith(_LEFTOVERS):
            shutil.rmtree(entry, ignore_errors=True)


def _discard(copy: Path, pool: Path) -> None:
    """Remove a ready copy: renamed first, so a run taking it meanwhile gets it whole or not at all."""
    gone = pool / f".gone-{uuid.uuid4().hex}"
    try:
        copy.rename(gone)
    except FileNotFoundError:  # a run took it
        return
    shutil.rmtree(gone, ignore_errors=True)


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
