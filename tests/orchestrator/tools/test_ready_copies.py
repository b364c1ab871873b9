"""Agents' copies made ahead of the run: taken by a rename, private (in-place writes stay in them)."""

from __future__ import annotations

import os
import stat
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
    made = sorted(pool.iterdir())
    assert len([p for p in made if not p.name.startswith(".")]) == len(AGENTS)
    second = RunWorkspaces.create(root=tmp_path / "ws", run_id="r2", agent_ids=AGENTS, source=tree)
    assert not [p for p in pool.iterdir() if not p.name.startswith(".")]  # both taken by r2
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
