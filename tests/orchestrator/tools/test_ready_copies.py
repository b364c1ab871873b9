"""Agents' copies made ahead of the run: taken by a rename, private (in-place writes stay in them)."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.config.repos import RepositoryConfig
from orchestrator.repos import RepoCache
from orchestrator.tools import ready
from orchestrator.tools.sandbox import Sandbox, SandboxSpec
from orchestrator.tools.workspace import SECRET_FILES, RunWorkspaces
from tests.orchestrator.repos.remotes import bare_remote, git
from tests.orchestrator.tools.conftest import needs_bwrap

FILES = {"a.txt": "alpha\n", "b.txt": "beta\n", "sub/c.txt": "gamma\n", ".env": "TOKEN=x\n"}
AGENTS = ("a0", "a1")
# Every in-place kind of write a command can make: append, truncate, chmod, rename over, write via link.
WRITES = "echo more >> a.txt; : > b.txt; chmod 700 sub/c.txt; echo new > t; mv t sub/c.txt; echo ok"


def _state(root: Path) -> dict[str, tuple[int, bytes]]:
    found: dict[str, tuple[int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode):
            found[str(path.relative_to(root))] = (stat.S_IMODE(info.st_mode), path.read_bytes())
    return found


def _tree(tmp: Path, files: dict[str, str]) -> tuple[RepoCache, RepositoryConfig, Path]:
    remote = bare_remote(tmp, files)
    repo = RepositoryConfig(name="r", url=f"file://{remote}", forge="none")
    cache = RepoCache(tmp / "state")
    cache.fetch(repo)
    head = cache.head(repo, "main")
    assert head is not None
    return cache, repo, cache.tree(repo, head)


def _run(tmp: Path, tree: Path, run: str) -> RunWorkspaces:
    spaces = RunWorkspaces.create(root=tmp / "ws", run_id=run, agent_ids=AGENTS, source=tree)
    assert spaces.filling is not None
    spaces.filling.join(timeout=60)
    return spaces


def test_a_second_run_takes_the_ready_copies_and_leaves_none_to_a_third(tmp_path: Path) -> None:
    _cache, _repo, tree = _tree(tmp_path, FILES)
    first = _run(tmp_path, tree, "r1")
    pool = ready.pool_of(tree, SECRET_FILES)
    made = [p.name for p in pool.iterdir() if not p.name.startswith(".")]
    assert len([name for name in made if not name.endswith(".links")]) == len(AGENTS)
    assert len([name for name in made if name.endswith(".links")]) == 1  # the next run's `.source`
    second = RunWorkspaces.create(root=tmp_path / "ws", run_id="r2", agent_ids=AGENTS, source=tree)
    assert not [p for p in pool.iterdir() if not p.name.startswith(".")]  # all taken by r2
    assert not (second.snapshot / ".env").exists()
    assert os.stat(second.snapshot / "a.txt").st_ino == os.stat(tree / "a.txt").st_ino  # links
    for agent in AGENTS:
        assert _state(second.path(agent)) == _state(first.path(agent))
        assert not (second.path(agent) / ".env").exists()  # secrets stay out of ready copies too
        assert os.stat(second.path(agent) / "a.txt").st_ino != os.stat(tree / "a.txt").st_ino
    assert second.filling is not None
    second.filling.join(timeout=60)


@needs_bwrap
@pytest.mark.sandbox
async def test_in_place_writes_in_a_ready_copy_reach_nobody_else(tmp_path: Path) -> None:
    _cache, _repo, tree = _tree(tmp_path, FILES)
    _run(tmp_path, tree, "r1")
    spaces = _run(tmp_path, tree, "r2")  # its copies came from the pool
    base, peer, snapshot = _state(tree), _state(spaces.path("a1")), _state(spaces.snapshot)
    result = await Sandbox("bwrap").run(WRITES, SandboxSpec(workspace=spaces.path("a0"), timeout_s=10.0))
    assert result.output.strip().endswith(b"ok"), result.output
    own = _state(spaces.path("a0"))
    assert own["a.txt"][1] == b"alpha\nmore\n"
    assert own["b.txt"][1] == b""
    assert own["sub/c.txt"][1] == b"new\n"
    assert _state(tree) == base
    assert _state(spaces.path("a1")) == peer
    assert _state(spaces.snapshot) == snapshot
    # The copies made for the next run are of the tree, not of what a0 wrote.
    third = RunWorkspaces.create(root=tmp_path / "ws", run_id="r3", agent_ids=AGENTS, source=tree)
    assert _state(third.path("a0")) == peer
    assert {c.path for c in spaces.changes("a0")} == {"a.txt", "b.txt", "sub/c.txt"}


def test_a_ready_copy_of_an_older_commit_is_brought_to_the_new_tree(tmp_path: Path) -> None:
    cache, repo, old = _tree(tmp_path, {**FILES, "gone/x.txt": "x\n", "was_file": "f\n"})
    _run(tmp_path, old, "r1")
    work = tmp_path / "work"
    git("clone", "--quiet", str(tmp_path / "remote.git"), str(work))
    (work / "a.txt").write_text("changed\n")
    (work / "gone" / "x.txt").unlink()
    (work / "was_file").unlink()
    (work / "was_file").mkdir()
    (work / "was_file" / "in.txt").write_text("in\n")
    (work / "sub" / "c.txt").chmod(0o755)
    git("add", "-A", cwd=work)
    git("commit", "--quiet", "-m", "second", cwd=work)
    git("push", "--quiet", "origin", "main", cwd=work)
    cache.fetch(repo)
    head = cache.head(repo, "main")
    assert head is not None
    new = cache.tree(repo, head)
    spaces = RunWorkspaces.create(root=tmp_path / "ws", run_id="r2", agent_ids=AGENTS, source=new)
    fresh = _state(new)
    del fresh[".env"]
    for agent in AGENTS:
        assert _state(spaces.path(agent)) == fresh
        assert not (spaces.path(agent) / "gone").exists()
        assert spaces.changes(agent) == []
    assert spaces.filling is not None
    spaces.filling.join(timeout=60)


def _commit(tmp: Path, cache: RepoCache, repo: RepositoryConfig, edit: dict[str, str | None]) -> Path:
    """Push a commit that writes (or, for None, deletes) the files of `edit`; its fetched base tree."""
    work = tmp / "work"
    if not work.exists():
        git("clone", "--quiet", str(tmp / "remote.git"), str(work))
    for rel, text in edit.items():
        if text is None:
            (work / rel).unlink()
        else:
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "--quiet", "-m", "next", cwd=work)
    git("push", "--quiet", "origin", "main", cwd=work)
    cache.fetch(repo)
    head = cache.head(repo, "main")
    assert head is not None
    return cache.tree(repo, head)


def test_after_a_new_commit_taken_copies_hold_its_content_and_none_of_the_old(tmp_path: Path) -> None:
    cache, repo, old = _tree(tmp_path, {**FILES, "keep/k.txt": "k\n"})
    _run(tmp_path, old, "r1")  # the pool now holds copies of the old commit
    new = _commit(tmp_path, cache, repo, {"a.txt": "ALPHA\n", "sub/c.txt": None, "d/new.txt": "new\n"})
    changes = ready.changed_paths(new, old.name)
    assert changes is not None  # brought by the mirror's list of changed paths, not a walk
    assert {rel for _, rel in changes} == {"a.txt", "sub/c.txt", "d/new.txt"}
    spaces = RunWorkspaces.create(root=tmp_path / "ws", run_id="r2", agent_ids=AGENTS, source=new)
    fresh = _state(new)
    del fresh[".env"]
    for agent in AGENTS:
        taken = spaces.path(agent)
        assert _state(taken) == fresh
        assert not (taken / "sub").exists()  # emptied by the commit: gone, as in a fresh checkout
        assert os.stat(taken / "a.txt").st_ino != os.stat(new / "a.txt").st_ino  # a copy, not a link
        assert spaces.changes(agent) == []
    assert _state(spaces.snapshot) == fresh  # the snapshot came from the pool too, brought by links
    assert os.stat(spaces.snapshot / "a.txt").st_ino == os.stat(new / "a.txt").st_ino
    assert not (spaces.snapshot / "sub").exists()
    assert _state(old)["a.txt"][1] == b"alpha\n"  # the old tree is never written
    assert spaces.filling is not None
    spaces.filling.join(timeout=60)
    for copy in (p for p in ready.pool_of(new, SECRET_FILES).iterdir() if not p.name.startswith(".")):
        assert copy.name.startswith(f"{new.name}.")  # the refill brought the old copies along too
        assert _state(copy) == fresh


def test_without_a_mirror_a_copy_is_brought_by_comparing_stats(tmp_path: Path) -> None:
    trees = tmp_path / "r.trees"
    old, new = trees / ("a" * 40), trees / ("b" * 40)
    for tree, text in ((old, "old\n"), (new, "new\n")):
        (tree / "sub").mkdir(parents=True)
        (tree / "same.txt").write_text("same\n")
        (tree / "sub" / "x.txt").write_text(text)
        (tree / ".env").write_text("T=1\n")
    os.utime(new / "same.txt", ns=(os.stat(old / "same.txt").st_mtime_ns,) * 2)
    (old / "gone.txt").write_text("gone\n")
    copy = tmp_path / "copy"
    shutil.copytree(old, copy)
    (copy / ".env").unlink()
    assert ready.changed_paths(new, old.name) is None
    ready.bring(new, copy, old.name, SECRET_FILES)
    assert _state(copy) == {k: v for k, v in _state(new).items() if k != ".env"}


def _pool(tmp: Path, tree: Path, patterns: tuple[str, ...], age_s: float = 0.0) -> Path:
    ready.fill(tree, patterns, 1)
    pool = ready.pool_of(tree, patterns)
    used = time.time() - age_s
    os.utime(pool, (used, used))
    return pool


def test_a_pool_unused_for_a_while_or_over_the_cap_is_removed_at_the_next_fill(tmp_path: Path) -> None:
    _cache, _repo, tree = _tree(tmp_path, FILES)
    idle = _pool(tmp_path, tree, ("idle",), age_s=ready.IDLE_S + 60)
    recent = [_pool(tmp_path, tree, (f"p{i}",), age_s=100.0 * (i + 1)) for i in range(ready.MAX_POOLS)]
    current = _pool(tmp_path, tree, SECRET_FILES)
    assert not idle.exists()  # with its ready copy
    kept = recent[: ready.MAX_POOLS - 1]  # the newest, beside the one in use
    assert all(p.is_dir() for p in kept)
    assert not recent[-1].exists()
    assert sorted(p.name for p in current.parent.iterdir()) == sorted(p.name for p in [*kept, current])


def test_what_a_crashed_filler_left_is_removed_but_not_a_living_fill_s_work(tmp_path: Path) -> None:
    _cache, _repo, tree = _tree(tmp_path, FILES)
    crashed = _pool(tmp_path, tree, ("crashed",))
    busy = _pool(tmp_path, tree, ("busy",))
    for pool in (crashed, busy):
        (pool / ".making-dead").mkdir()
        (pool / ".making-dead" / "a.txt").write_text("half\n")
    (crashed.parent / ".gone-dead").mkdir()
    with open(busy / ".lock", "a") as handle:  # a fill at work in another process holds this
        fcntl.flock(handle, fcntl.LOCK_EX)
        _pool(tmp_path, tree, SECRET_FILES)  # the next run's refill tidies
    assert not (crashed / ".making-dead").exists()
    assert not (crashed.parent / ".gone-dead").exists()
    assert (busy / ".making-dead" / "a.txt").is_file()
    left = sorted(p.name.removeprefix(f"{tree.name}.")[32:] for p in crashed.iterdir() if p.name != ".lock")
    assert left == ["", ".links"]  # its copy and snapshot, nothing else


def test_a_filler_killed_midway_leaves_nothing_after_the_next_start(tmp_path: Path) -> None:
    _cache, _repo, tree = _tree(tmp_path, {f"d{i % 20}/f{i}.txt": "x\n" * 50 for i in range(3000)})
    pool = ready.pool_of(tree, SECRET_FILES)
    script = "import sys; from pathlib import Path; from orchestrator.tools import ready\n"
    script += "from orchestrator.tools.workspace import SECRET_FILES\n"
    script += "ready.fill(Path(sys.argv[1]), SECRET_FILES, 8)\n"
    filler = subprocess.Popen([sys.executable, "-c", script, str(tree)], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not list(pool.glob(".making-*")) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert list(pool.glob(".making-*")), "the filler never started a copy"
    finally:
        os.killpg(filler.pid, signal.SIGKILL)  # the filler and its `cp`
        filler.wait()
    ready.fill(tree, SECRET_FILES, 1)  # a new process's first refill
    assert not [p for p in pool.iterdir() if p.name.startswith((".making-", ".gone-"))]
    for copy in (p for p in pool.iterdir() if not p.name.startswith(".")):
        assert len(_state(copy)) == 3000


def test_a_folder_becoming_a_link_and_back_is_brought_without_writing_through_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "x").mkdir(parents=True)
    (outside / "x" / "f.txt").write_text("outside\n")
    cache, repo, _old = _tree(tmp_path, {**FILES, "e/f.txt": "e\n"})
    work = tmp_path / "work"
    git("clone", "--quiet", str(tmp_path / "remote.git"), str(work))
    (work / "d").symlink_to(outside / "x")  # `d` a link in the first commit the pool copies
    git("add", "-A", cwd=work)
    git("commit", "--quiet", "-m", "link", cwd=work)
    git("push", "--quiet", "origin", "main", cwd=work)
    cache.fetch(repo)
    head = cache.head(repo, "main")
    assert head is not None
    linked = cache.tree(repo, head)
    _run(tmp_path, linked, "r1")
    (work / "d").unlink()
    (work / "e" / "f.txt").unlink()
    (work / "e").rmdir()
    (work / "e").symlink_to(outside / "x")
    new = _commit(tmp_path, cache, repo, {"d/f.txt": "inside\n"})  # now `d` a folder, `e` a link
    assert ready.changed_paths(new, linked.name) is not None
    spaces = _run(tmp_path, new, "r2")
    for agent in AGENTS:
        assert (spaces.path(agent) / "d" / "f.txt").read_text() == "inside\n"
        assert not (spaces.path(agent) / "d").is_symlink()
        assert os.readlink(spaces.path(agent) / "e") == str(outside / "x")
    assert (outside / "x" / "f.txt").read_text() == "outside\n"
    assert sorted(p.name for p in outside.rglob("*")) == ["f.txt", "x"]


def test_a_diff_naming_a_path_out_of_the_tree_is_not_used(tmp_path: Path) -> None:
    cache, repo, old = _tree(tmp_path, FILES)
    mirror = cache.mirror(repo)
    blob = git(f"--git-dir={mirror}", "hash-object", "-w", "--stdin", cwd=tmp_path).strip()
    inner = subprocess.run(
        ["git", f"--git-dir={mirror}", "mktree"], input=f"100644 blob {blob}\tx\n", text=True,
        capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip
    top = subprocess.run(
        ["git", f"--git-dir={mirror}", "mktree"], input=f"040000 tree {inner}\t..\n", text=True,
        capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip
    env = {"GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z"}
    commit = git(f"--git-dir={mirror}", "commit-tree", top, "-p", old.name, "-m", "x", env=env).strip()
    assert ready.changed_paths(old.parent / commit, old.name) is None


def test_at_start_up_pools_no_run_uses_are_tidied_in_every_repository(tmp_path: Path) -> None:
    """No refill comes for a repository dropped from the configuration: start-up tidies it."""
    cache, _repo, tree = _tree(tmp_path, FILES)
    recent = _pool(tmp_path, tree, ("recent",))
    idle = _pool(tmp_path, tree, ("idle",), age_s=ready.IDLE_S + 60)  # its fill tidied the others
    (recent / ".making-dead").mkdir()  # a refill killed midway
    assert ready.tidy_ready_copies(cache.root) == 1
    assert not idle.exists()
    assert recent.is_dir()
    assert not (recent / ".making-dead").exists()
    assert ready.tidy_ready_copies(tmp_path / "no-repos-yet") == 0
