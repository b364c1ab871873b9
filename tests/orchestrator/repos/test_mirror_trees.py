"""Base trees made from the previous one by hard links: equal to a fresh checkout, the old one untouched."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from pathlib import Path

from orchestrator.config.repos import RepositoryConfig
from orchestrator.repos import RepoCache
from orchestrator.repos.mirror import is_base_tree
from orchestrator.repos.trusted_git import GitError
from orchestrator.tools.workspace import RunWorkspaces
from tests.orchestrator.repos.remotes import bare_remote, git

FILES = {
    "keep.txt": "same\n",
    "edit.txt": "before\n",
    "gone.txt": "deleted later\n",
    "was_file": "a file, then a folder\n",
    "folder/inner.txt": "a folder, then a file\n",
    "deep/a/b/c.txt": "only file of its folders\n",
    "script.sh": "echo hi\n",
    "weird [*?] name.txt": "glob characters\n",
}


def _state(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under `root`: kind, permission bits, content or link target."""
    found: dict[str, tuple[str, int, str]] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            found[rel] = ("link", 0, os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            found[rel] = ("dir", 0, "")
        else:
            found[rel] = ("file", stat.S_IMODE(info.st_mode) & 0o111, path.read_text())
    return found


def _second_commit(tmp: Path, remote: Path) -> None:
    work = tmp / "work"
    git("clone", "--quiet", str(remote), str(work))
    (work / "edit.txt").write_text("after\n")
    (work / "gone.txt").unlink()
    (work / "was_file").unlink()
    (work / "was_file").mkdir()
    (work / "was_file" / "now.txt").write_text("inside\n")
    (work / "folder" / "inner.txt").unlink()
    (work / "folder").rmdir()
    (work / "folder").write_text("now a file\n")
    (work / "deep" / "a" / "b" / "c.txt").unlink()
    (work / "script.sh").chmod(0o755)
    (work / "link").symlink_to("keep.txt")
    (work / "weird [*?] name.txt").write_text("changed\n")
    (work / "new" / "sub").mkdir(parents=True)
    (work / "new" / "sub" / "added.txt").write_text("added\n")
    git("add", "-A", cwd=work)
    git("commit", "--quiet", "-m", "second", cwd=work)
    git("push", "--quiet", "origin", "main", cwd=work)


def test_a_new_commits_tree_from_hard_links_equals_a_fresh_checkout_and_leaves_the_old_one(
    tmp_path: Path,
) -> None:
    remote = bare_remote(tmp_path, FILES)
    repo = RepositoryConfig(name="r", url=f"file://{remote}", forge="none")
    cache = RepoCache(tmp_path / "state")
    cache.fetch(repo)
    first = cache.head(repo, "main")
    assert first is not None
    old = cache.tree(repo, first)
    before = _state(old)
    _second_commit(tmp_path, remote)
    cache.fetch(repo)
    second = cache.head(repo, "main")
    assert second is not None
    new = cache.tree(repo, second)

    fresh = RepoCache(tmp_path / "fresh")  # no earlier tree: the whole commit checked out
    fresh.fetch(repo)
    assert _state(new) == _state(fresh.tree(repo, second))
    assert _state(old) == before, "the older tree is never written through a shared inode"
    assert (old / "keep.txt").stat().st_ino == (new / "keep.txt").stat().st_ino, "unchanged files are linked"
    assert (old / "edit.txt").stat().st_ino != (new / "edit.txt").stat().st_ino
    assert not (new / "deep").exists(), "folders left empty go, as a checkout would not make them"
    assert is_base_tree(new)
    assert not is_base_tree(tmp_path)


def test_a_runs_snapshot_links_the_base_tree_and_agents_get_real_copies(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, FILES)
    repo = RepositoryConfig(name="r", url=f"file://{remote}", forge="none")
    cache = RepoCache(tmp_path / "state")
    cache.fetch(repo)
    head = cache.head(repo, "main")
    assert head is not None
    tree = cache.tree(repo, head)
    spaces = RunWorkspaces.create(root=tmp_path / "ws", run_id="run-1", agent_ids=("a1",), source=tree)
    try:
        inode = (tree / "keep.txt").stat().st_ino
        assert (spaces.snapshot / "keep.txt").stat().st_ino == inode
        assert (spaces.path("a1") / "keep.txt").stat().st_ino != inode
        (spaces.path("a1") / "keep.txt").write_text("the agent wrote this\n")
        assert (tree / "keep.txt").read_text() == "same\n"
        assert [c.path for c in spaces.changes("a1")] == ["keep.txt"]
    finally:
        spaces.close()
    assert (tree / "keep.txt").read_text() == "same\n"


def test_a_crafted_tree_naming_a_path_out_of_it_never_reaches_past_it(tmp_path: Path) -> None:
    """A remote can send a tree with a `..` entry (fetches do not fsck): linking the new tree from
    the old one by its diff would then remove `../<old commit>`, the older tree itself."""
    remote = bare_remote(tmp_path, FILES)
    repo = RepositoryConfig(name="r", url=f"file://{remote}", forge="none")
    cache = RepoCache(tmp_path / "state")
    cache.fetch(repo)
    first = cache.head(repo, "main")
    assert first is not None
    old = cache.tree(repo, first)
    before = _state(old)
    mirror = cache.mirror(repo)
    blob = git(f"--git-dir={mirror}", "hash-object", "-w", "--stdin", cwd=tmp_path).strip()
    inner = subprocess.run(
        ["git", f"--git-dir={mirror}", "mktree"], input=f"100644 blob {blob}\t{first}\n", text=True,
        capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip
    top = inner
    for _ in range(2):  # `../../<old commit>`: the tree is built two levels down (a scratch folder)
        top = subprocess.run(
            ["git", f"--git-dir={mirror}", "mktree"], input=f"040000 tree {top}\t..\n", text=True,
            capture_output=True, check=True,
        ).stdout.strip()  # fmt: skip
    env = {"GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z"}
    crafted = git(f"--git-dir={mirror}", "commit-tree", top, "-p", first, "-m", "x", env=env).strip()
    with contextlib.suppress(GitError):  # git may refuse to check such a tree out: that is fine too
        cache.tree(repo, crafted)
    assert old.is_dir()
    assert _state(old) == before
