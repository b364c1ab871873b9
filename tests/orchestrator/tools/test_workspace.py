"""Per-agent workspaces: copies, the winner's patch, and applying it back with git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import PatchConflict, WorkspaceError
from orchestrator.tools.workspace import RunWorkspaces, apply_patch_to_source, patch_paths


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("def a():\n    return 1\n")
    (src / "README.md").write_text("# demo\n")
    (src / "old.txt").write_text("remove me\n")
    (src / "link").symlink_to("README.md")
    return src


def _spaces(tmp_path: Path, source: Path | None) -> RunWorkspaces:
    return RunWorkspaces.create(
        root=tmp_path / "ws", run_id="run1", agent_ids=("alpha", "beta"), source=source
    )


def test_each_agent_gets_its_own_copy_and_sees_peers(tmp_path: Path) -> None:
    spaces = _spaces(tmp_path, _source(tmp_path))
    alpha = spaces.path("alpha")
    assert alpha == tmp_path / "ws" / "run1" / "alpha"
    assert (alpha / "pkg" / "a.py").read_text() == "def a():\n    return 1\n"
    assert (alpha / "link").is_symlink()
    assert spaces.peers("alpha") == (tmp_path / "ws" / "run1" / "beta",)
    (alpha / "README.md").write_text("changed\n")
    assert (spaces.path("beta") / "README.md").read_text() == "# demo\n"
    assert spaces.patch("beta") is None
    spaces.close()
    assert not (tmp_path / "ws" / "run1").exists()


def test_empty_workspaces_without_a_source(tmp_path: Path) -> None:
    spaces = _spaces(tmp_path, None)
    assert list(spaces.path("alpha").iterdir()) == []
    (spaces.path("alpha") / "new.txt").write_text("hello\n")
    patch = spaces.patch("alpha")
    assert patch is not None
    assert "new file mode 100644" in patch
    assert "+hello" in patch


@pytest.mark.parametrize(
    ("run_id", "agents"),
    [("../up", ("a",)), ("run", ("a/b",)), ("run", ("..",)), ("", ("a",)), ("run", ("x.source",))],
)
def test_names_that_would_escape_are_refused(tmp_path: Path, run_id: str, agents: tuple[str, ...]) -> None:
    with pytest.raises(WorkspaceError):
        RunWorkspaces.create(root=tmp_path, run_id=run_id, agent_ids=agents, source=None)


def test_patch_lists_added_modified_deleted_and_binary(tmp_path: Path) -> None:
    spaces = _spaces(tmp_path, _source(tmp_path))
    ws = spaces.path("alpha")
    (ws / "pkg" / "a.py").write_text("def a():\n    return 2\n")
    (ws / "pkg" / "b.py").write_text("B = 1\n")
    (ws / "old.txt").unlink()
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02")
    patch = spaces.patch("alpha")
    assert patch is not None
    assert "diff --git a/pkg/a.py b/pkg/a.py\n" in patch
    assert "-    return 1\n+    return 2\n" in patch
    assert "new file mode 100644\n--- /dev/null\n+++ b/pkg/b.py" in patch
    assert "deleted file mode 100644\n--- a/old.txt\n+++ /dev/null" in patch
    assert "Binary files a/blob.bin and b/blob.bin differ" in patch
    assert set(patch_paths(patch)) == {"pkg/a.py", "pkg/b.py", "old.txt", "blob.bin"}


def test_a_symlink_to_a_secret_is_diffed_as_a_link_not_its_content(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    spaces = _spaces(tmp_path, _source(tmp_path))
    os.symlink(secret, spaces.path("alpha") / "leak")
    patch = spaces.patch("alpha")
    assert patch is not None
    assert "new file mode 120000" in patch
    assert "TOP-SECRET" not in patch


def test_git_internals_are_not_part_of_the_patch(tmp_path: Path) -> None:
    spaces = _spaces(tmp_path, _source(tmp_path))
    (spaces.path("alpha") / ".git").mkdir()
    (spaces.path("alpha") / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert spaces.patch("alpha") is None


def test_patch_applies_back_with_git_apply(tmp_path: Path) -> None:
    source = _source(tmp_path)
    spaces = _spaces(tmp_path, source)
    ws = spaces.path("alpha")
    (ws / "pkg" / "a.py").write_text("def a():\n    return 2\n")
    (ws / "pkg" / "b.py").write_text("B = 1\n")
    (ws / "old.txt").unlink()
    (ws / "README.md").write_text("# demo")  # no newline at end of file
    patch = spaces.patch("alpha")
    assert patch is not None
    apply_patch_to_source(patch, source)
    assert (source / "pkg" / "a.py").read_text() == "def a():\n    return 2\n"
    assert (source / "pkg" / "b.py").read_text() == "B = 1\n"
    assert not (source / "old.txt").exists()
    assert (source / "README.md").read_text() == "# demo"
    assert spaces.changes("alpha") != []  # the snapshot keeps the original for later diffs


def test_a_conflicting_source_is_left_untouched(tmp_path: Path) -> None:
    source = _source(tmp_path)
    spaces = _spaces(tmp_path, source)
    (spaces.path("alpha") / "pkg" / "b.py").write_text("B = 1\n")
    (spaces.path("alpha") / "pkg" / "a.py").write_text("def a():\n    return 2\n")
    patch = spaces.patch("alpha")
    assert patch is not None
    (source / "pkg" / "a.py").write_text("def a():\n    return 'edited meanwhile'\n")
    with pytest.raises(PatchConflict) as info:
        apply_patch_to_source(patch, source)
    assert "pkg/a.py" in info.value.paths
    assert not (source / "pkg" / "b.py").exists()  # all or nothing: b.py was not written either
    assert "edited meanwhile" in (source / "pkg" / "a.py").read_text()


@pytest.mark.parametrize(
    "patch",
    [
        "diff --git a/../escape b/../escape\nnew file mode 100644\n",
        "diff --git a//etc/passwd b//etc/passwd\n",
        "diff --git a/.git/hooks/pre-commit b/.git/hooks/pre-commit\n",
        "not a patch at all\n",
        "diff --git a/x b/../../etc/passwd\n",  # header names that differ
        "diff --git a/x b/x\nrename from x\nrename to ../y\n",
        'diff --git "a/x" "b/x"\n',
        "diff --git a/x b/x\n--- a/x\n+++ b/../escape\n@@ -1 +1 @@\n-a\n+b\n",
    ],
)
def test_patches_reaching_outside_the_tree_are_refused(tmp_path: Path, patch: str) -> None:
    source = _source(tmp_path)
    before = subprocess.run(["ls", "-laR", str(tmp_path)], capture_output=True, check=True).stdout
    with pytest.raises(WorkspaceError):
        apply_patch_to_source(patch, source)
    assert subprocess.run(["ls", "-laR", str(tmp_path)], capture_output=True, check=True).stdout == before


def test_git_refuses_to_write_through_a_symlinked_directory(tmp_path: Path) -> None:
    source = _source(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (source / "sub").symlink_to(outside)
    patch = (
        "diff --git a/sub/x.txt b/sub/x.txt\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/sub/x.txt\n@@ -0,0 +1 @@\n+pwned\n"
    )
    with pytest.raises(PatchConflict):
        apply_patch_to_source(patch, source)
    assert not (outside / "x.txt").exists()


def test_touching_a_file_without_changing_it_is_not_a_change(tmp_path: Path) -> None:
    spaces = _spaces(tmp_path, _source(tmp_path))
    target = spaces.path("alpha") / "README.md"
    os.utime(target, ns=(1, 1))
    target.write_text(target.read_text())
    assert spaces.patch("alpha") is None


def test_paths_with_spaces_and_dashes_in_hunks_are_read_right(tmp_path: Path) -> None:
    source = tmp_path / "repo"
    source.mkdir()
    (source / "my notes.sql").write_text("-- old comment\nSELECT 1;\n")
    spaces = _spaces(tmp_path, source)
    (spaces.path("alpha") / "my notes.sql").write_text("SELECT 1;\n")  # removes a line starting "--"
    patch = spaces.patch("alpha")
    assert patch is not None
    assert "\n--- old comment\n" in patch  # a hunk line that looks like a file header
    assert patch_paths(patch) == ("my notes.sql",)
    apply_patch_to_source(patch, source)
    assert (source / "my notes.sql").read_text() == "SELECT 1;\n"
