"""Test helpers: a local bare remote with a first commit, and plain git to look at it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "seed",
    "GIT_AUTHOR_EMAIL": "seed@example.invalid",
    "GIT_COMMITTER_NAME": "seed",
    "GIT_COMMITTER_EMAIL": "seed@example.invalid",
}


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Plain git for the test's own checks (never the code under test)."""
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env={**_ENV, **(env or {})}, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def bare_remote(tmp: Path, files: dict[str, str], *, branch: str = "main") -> Path:
    """A bare repository at `tmp/remote.git` whose `branch` has one commit with `files`."""
    remote = tmp / "remote.git"
    git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(remote))
    seed = tmp / "seed"
    git("init", "--quiet", f"--initial-branch={branch}", str(seed))
    for rel, text in files.items():
        (seed / rel).parent.mkdir(parents=True, exist_ok=True)
        (seed / rel).write_text(text)
    git("add", "-A", cwd=seed)
    git("commit", "--quiet", "-m", "first", cwd=seed)
    git("push", "--quiet", str(remote), f"{branch}:{branch}", cwd=seed)
    return remote


def branches(remote: Path) -> list[str]:
    """The remote's branch names."""
    out = git(f"--git-dir={remote}", "for-each-ref", "--format=%(refname:short)", "refs/heads/")
    return sorted(out.split())


def without_index_lines(diff: str) -> str:
    """git's diff minus its `index` lines (the run's patch has none), for comparing the two."""
    return "".join(line for line in diff.splitlines(keepends=True) if not line.startswith("index "))
