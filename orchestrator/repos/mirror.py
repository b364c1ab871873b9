"""The bot's bare mirror of each repository, fetched per run, and the base trees agents copy from.

Layout under the state folder: `repos/<name>.git` (bare mirror, fetched, never re-cloned) and
`repos/<name>.trees/<commit>/` (the files of one commit, checked out once from the mirror's
objects through a private index, with no `.git` in it). A run's workspaces are copies of such a
tree (`RunWorkspaces`, reflinked where the filesystem can), so a run never clones or copies the
repository's history, and two runs on the same commit share one checkout.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from orchestrator.config.repos import RepositoryConfig
from orchestrator.repos.trusted_git import GitError, run_git

KEPT_TREES = 8  # base trees kept per repository (the newest by use)


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
            files.mkdir()
            run_git(["read-tree", commit], cwd=trees, git_dir=mirror, extra_env=index)
            run_git(
                ["checkout-index", "--all", "--force", f"--prefix={files}/"],
                cwd=trees,
                git_dir=mirror,
                work_tree=files,
                extra_env=index,
            )
            try:
                files.rename(target)
            except OSError:
                if not target.is_dir():  # another run made it meanwhile: theirs is the same
                    raise
        self._trim(trees)
        return target

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
