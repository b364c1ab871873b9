"""The bot's bare mirror of each repository, fetched per run, and the base trees agents copy from.

Layout under the state folder: `repos/<name>.git` (bare mirror, fetched, never re-cloned) and
`repos/<name>.trees/<commit>/` (the files of one commit, checked out once from the mirror's
objects through a private index, with no `.git` in it). A run's workspaces are copies of such a
tree (`RunWorkspaces`, reflinked where the filesystem can), so a run never clones or copies the
repository's history, and two runs on the same commit share one checkout.

Trees are immutable once made, which makes hard links safe: a new commit's tree starts as a hard
link of the newest tree (a directory entry per file, no data written: ~20x faster than writing
10,000 files here), then every path the two commits differ in is unlinked and written from the
new commit, so no inode of the older tree is ever written. A run's `.source` snapshot links the
tree the same way (`is_base_tree`). Agents' workspaces stay real copies: they write in place.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from orchestrator.config.repos import RepositoryConfig
from orchestrator.repos.trusted_git import GitError, plain_tree_path, run_git, through_link

KEPT_TREES = 8  # base trees kept per repository (the newest by use)
_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def is_base_tree(path: Path) -> bool:
    """Whether `path` is one of the cache's immutable commit trees (`<name>.trees/<commit>`)."""
    return path.parent.name.endswith(".trees") and _COMMIT.fullmatch(path.name) is not None


class RepoCache:
    """Mirrors and base trees of every configured repository, under `<state_dir>/repos/`."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / "repos"

    def mirror(self, repository: RepositoryConfig) -> Path:
        """The bare mirror's folder (it may not exist yet)."""
        return self.root / f"{repository.name}.git"

    def fetch(self, repository: RepositoryConfig, auth: Mapping[str, str] | None = None) -> Path:
        """Bring the mirror up to date with the remote's branches (created on first use); its path."""
        mirror = self.mirror(repository)
        with self._locked(repository):
            if not (mirror / "HEAD").is_file():
                shutil.rmtree(mirror, ignore_errors=True)
                mirror.parent.mkdir(parents=True, exist_ok=True)
                run_git(["init", "--quiet", "--bare", str(mirror)], cwd=mirror.parent)
            refspec = "+refs/heads/*:refs/heads/*"
            run_git(
                ["fetch", "--quiet", "--prune", "--no-tags", "--", repository.url, refspec],
                cwd=mirror,
                git_dir=mirror,
                extra_env=auth,
            )
        return mirror

    def head(self, repository: RepositoryConfig, branch: str) -> str | None:
        """The commit `branch` points at in the mirror, or None when the branch does not exist."""
        try:
            out = run_git(
                ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"],
                cwd=self.root,
                git_dir=self.mirror(repository),
            )
        except GitError:
            return None
        return out.strip() or None

    def tree(self, repository: RepositoryConfig, commit: str) -> Path:
        """The files of `commit` (no `.git`), checked out once and shared by every run on it."""
        trees = self.root / f"{repository.name}.trees"
        target = trees / commit
        if target.is_dir():
            os.utime(target)  # most recently used: kept by the trim
            return target
        trees.mkdir(parents=True, exist_ok=True)
        mirror = self.mirror(repository)
        with tempfile.TemporaryDirectory(prefix=".new-", dir=trees) as scratch:
            files = Path(scratch) / "tree"
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            run_git(["read-tree", commit], cwd=trees, git_dir=mirror, extra_env=index)
            previous = self._newest(trees)
            if previous is None or not _linked_from(previous, commit, files, mirror, index):
                shutil.rmtree(files, ignore_errors=True)
                files.mkdir()
                _checkout(files, mirror, index, ["--all"])
            try:
                files.rename(target)
            except OSError:
                if not target.is_dir():  # another run made it meanwhile: theirs is the same
                    raise
        self._trim(trees)
        return target

    @staticmethod
    def _newest(trees: Path) -> Path | None:
        made = [p for p in trees.iterdir() if not p.name.startswith(".") and _COMMIT.fullmatch(p.name)]
        return max(made, key=lambda p: p.stat().st_mtime_ns, default=None)

    def _trim(self, trees: Path) -> None:
        kept = sorted(
            (p for p in trees.iterdir() if not p.name.startswith(".")),
            key=lambda p: p.stat().st_mtime_ns,
            reverse=True,
        )
        for old in kept[KEPT_TREES:]:
            shutil.rmtree(old, ignore_errors=True)

    @contextmanager
    def _locked(self, repository: RepositoryConfig) -> Iterator[None]:
        """One fetch at a time per mirror (two runs starting together share the result)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{repository.name}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _checkout(files: Path, mirror: Path, index: Mapping[str, str], paths: list[str]) -> None:
    """Write `paths` (or `--all`) of the private index's commit under `files`."""
    run_git(
        ["checkout-index", "--force", f"--prefix={files}/", *paths],
        cwd=files.parent,
        git_dir=mirror,
        work_tree=files,
        extra_env=index,
    )


def _linked_from(previous: Path, commit: str, files: Path, mirror: Path, index: Mapping[str, str]) -> bool:
    """Make `files` the tree of `commit` from `previous` by hard links, then the differing paths.

    False when it cannot (no `cp`, the old commit not in the mirror, the copy failed): the caller
    then checks the whole commit out.
    """
    cp = shutil.which("cp")
    if cp is None:
        return False
    try:
        listed = run_git(
            ["diff", "--name-status", "--no-renames", "-z", previous.name, commit, "--"],
            cwd=files.parent,
            git_dir=mirror,
        )
    except GitError:
        return False
    if subprocess.run(
        [cp, "-al", "--", str(previous), str(files)], capture_output=True, check=False
    ).returncode:
        return False
    fields = listed.split("\0")
    changes = list(zip(fields[0::2], fields[1::2], strict=False))  # (status letter, path)
    if not all(plain_tree_path(rel) and not through_link(files, rel) for _status, rel in changes if rel):
        return False  # a crafted tree, or a link become a folder: check the whole commit out
    for _status, rel in changes:
        _unlink(files, rel)
    written = [rel for status, rel in changes if rel and status != "D"]
    for start in range(0, len(written), 500):  # a bounded command line
        _checkout(files, mirror, index, ["--", *written[start : start + 500]])
    return True


def _unlink(files: Path, rel: str) -> None:
    """Remove `rel` under `files` without writing through a link, then its parents left empty.

    A path of the old commit goes before the new commit's file is written (a new inode), so the
    older tree is never written; an emptied folder goes too, as a fresh checkout would not make it
    (git has no empty folders), and a file of the new commit may take its place.
    """
    target = files / rel
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    parent = target.parent
    while parent != files:
        try:
            parent.rmdir()
        except OSError:  # not empty (or gone): its files belong to the new commit too
            break
        parent = parent.parent
