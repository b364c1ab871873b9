"""Per-run, per-agent workspaces: copies of the source, a snapshot to diff against, and apply-back.

Layout: `<root>/<run_id>/<agent_id>/` per agent and `<root>/<run_id>.source/`, a private copy of
the source taken at the start, so the winner's patch is against what the agents saw even if the
source moves on meanwhile. Applying the patch back refuses files that changed since (no silent
overwrite) and is all-or-nothing. Symlinks are never followed while diffing: an agent's link to
`/etc/shadow` must not smuggle that file's content into a patch posted to Slack.
Applying uses `git apply`, which checks every hunk before writing anything.
"""

from __future__ import annotations

import difflib
import os
import shutil
import stat
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from orchestrator.config.team import WorkspaceConfig
from orchestrator.errors import PatchConflict, WorkspaceError
from orchestrator.repos.mirror import is_base_tree
from orchestrator.repos.trusted_git import GitError, run_git
from orchestrator.tools import ready
from orchestrator.tools.treecopy import copy_tree as copy_tree
from orchestrator.tools.treecopy import drop_secrets as drop_secrets
from orchestrator.tools.treecopy import file_stats, same_stat
from orchestrator.tools.treecopy import is_secret_name as is_secret_name

ChangeKind = Literal["added", "modified", "deleted"]
# Names of secrets files and folders never copied into an agent's workspace (the team file adds more).
SECRET_FILES = (
    ".env",
    ".env.*",
    ".envrc",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".npmrc",
    ".pypirc",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    "credentials.json",
    "service-account*.json",
    ".aws",
    ".ssh",
    ".gnupg",
    ".docker",
    ".kube",
    "secrets.yaml",
    "secrets.yml",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One file as stored: its bytes (a symlink's target text for links) and whether it is a link."""

    data: bytes
    link: bool = False
    executable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FileChange:
    """A path (relative, POSIX) whose entry differs between the snapshot and a workspace."""

    path: str
    kind: ChangeKind
    old: Entry | None
    new: Entry | None


class RunWorkspaces:
    """The workspaces of one run; create with `await RunWorkspaces.create(...)`, remove with `close()`."""

    def __init__(self, *, root: Path, run_id: str, agent_ids: Sequence[str], source: Path | None) -> None:
        _check_name(run_id, "run id")
        for agent_id in agent_ids:
            _check_name(agent_id, "agent id")
        self.root = root
        self.run_dir = root / run_id
        self.source = source
        self.snapshot = root / f"{run_id}.source"
        self.agent_ids = tuple(agent_ids)
        self.filling: threading.Thread | None = None  # making ready copies for the next run

    @classmethod
    def create(
        cls,
        *,
        root: Path,
        run_id: str,
        agent_ids: Sequence[str],
        source: Path | None,
        secrets: Sequence[str] | None = SECRET_FILES,
    ) -> RunWorkspaces:
        """Copy the source once per agent (symlinks kept as links), or make empty directories.

        Files and folders whose name matches one of `secrets` are left out of the copy (None:
        copy everything), so an agent's command never reads them and the patch never names them.
        """
        if source is not None and not source.is_dir():
            raise WorkspaceError(f"workspace source {source} is not a directory")
        spaces = cls(root=root, run_id=run_id, agent_ids=agent_ids, source=source)
        if spaces.run_dir.exists():
            raise WorkspaceError(f"workspaces for run {run_id} already exist at {spaces.run_dir}")
        try:
            spaces.run_dir.mkdir(parents=True)
            base = source is not None and is_base_tree(source)
            # A repository's commit tree is immutable and the snapshot is only read: linked, not
            # copied. Agents write in place, so theirs are real copies of it. Both are made ahead of
            # the run where they can be (`tools.ready`).
            linked = source is not None and base and ready.claim(source, secrets, spaces.snapshot, links=True)
            if source is not None and not linked:
                copy_tree(source, spaces.snapshot, link=base)
                if secrets:
                    drop_secrets(spaces.snapshot, secrets)
            for agent_id in spaces.agent_ids:
                if source is None:
                    spaces.path(agent_id).mkdir()
                elif not (base and ready.claim(source, secrets, spaces.path(agent_id))):
                    copy_tree(spaces.snapshot, spaces.path(agent_id))
            if source is not None and base:  # the next run's copies, made while this one works
                spaces.filling = ready.fill_in_background(source, secrets, len(spaces.agent_ids))
        except OSError as exc:
            spaces.close()
            raise WorkspaceError(f"could not create workspaces under {spaces.run_dir}: {exc}") from exc
        return spaces

    @classmethod
    def reopen(
        cls,
        *,
        root: Path,
        run_id: str,
        agent_ids: Sequence[str],
        source: Path | None,
        secrets: Sequence[str] | None = SECRET_FILES,
    ) -> RunWorkspaces:
        """The workspaces of a resumed run as it left them; created when they are gone (a new root)."""
        spaces = cls(root=root, run_id=run_id, agent_ids=agent_ids, source=source)
        if not spaces.run_dir.is_dir() or (source is not None and not spaces.snapshot.is_dir()):
            shutil.rmtree(spaces.run_dir, ignore_errors=True)
            return cls.create(root=root, run_id=run_id, agent_ids=agent_ids, source=source, secrets=secrets)
        for agent_id in spaces.agent_ids:
            spaces.path(agent_id).mkdir(exist_ok=True)
        return spaces

    def path(self, agent_id: str) -> Path:
        """The agent's own (writable) workspace."""
        if agent_id not in self.agent_ids:
            raise WorkspaceError(f"no workspace for agent {agent_id!r}")
        return self.run_dir / agent_id

    def peers(self, agent_id: str) -> tuple[Path, ...]:
        """The other agents' workspaces: readable by `agent_id`, never writable."""
        return tuple(self.run_dir / other for other in self.agent_ids if other != agent_id)

    def changes(self, agent_id: str) -> list[FileChange]:
        """Every file added, modified or deleted in the agent's workspace relative to the snapshot.

        Files whose size and mtime are unchanged are not read (the copy keeps mtimes, and any
        write sets a new one), so a large, mostly untouched repository diffs in stat time.
        """
        top_before, top_after = self.snapshot, self.path(agent_id)
        before = file_stats(top_before) if self.source is not None else {}
        after = file_stats(top_after)
        changes: list[FileChange] = []
        for rel in sorted(before.keys() | after.keys()):
            b, a = before.get(rel), after.get(rel)
            if b is not None and a is not None and same_stat(b, a):
                continue
            old = _entry(top_before / rel, b) if b is not None else None
            new = _entry(top_after / rel, a) if a is not None else None
            if old == new:
                continue
            kind: ChangeKind = "added" if old is None else "deleted" if new is None else "modified"
            changes.append(FileChange(path=rel, kind=kind, old=old, new=new))
        return changes

    def patch(self, agent_id: str) -> str | None:
        """The agent's changes as a git-style unified diff, or None when it changed nothing."""
        changes = self.changes(agent_id)
        return "".join(render_change(change) for change in changes) or None

    def close(self) -> None:
        """Remove every directory of the run (idempotent)."""
        for directory in (self.run_dir, self.snapshot):
            shutil.rmtree(directory, ignore_errors=True)


def secret_patterns(config: WorkspaceConfig) -> tuple[str, ...] | None:
    """The name patterns left out of workspaces: the built-in list plus the team's (None: copy all)."""
    return None if config.copy_secrets else (*SECRET_FILES, *config.secrets)


def _check_name(value: str, what: str) -> None:
    # These become directory names: one plain path component, nothing that climbs out.
    bad = value in {".", "..", ".massgen-snapshot.json"} or value.endswith(".source")
    if not value or bad or "/" in value or "\x00" in value:
        raise WorkspaceError(f"{what} {value!r} cannot name a workspace directory")


def _entry(path: Path, info: os.stat_result) -> Entry:
    if stat.S_ISLNK(info.st_mode):
        return Entry(data=os.readlink(path).encode(), link=True)
    # O_NOFOLLOW: a file swapped for a link after the walk must not pull its target into the patch.
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as handle:
        data = handle.read()
    return Entry(data=data, executable=bool(info.st_mode & stat.S_IXUSR))


def _mode(entry: Entry) -> str:
    return "120000" if entry.link else "100755" if entry.executable else "100644"


def _text_lines(entry: Entry | None) -> list[str] | None:
    """The entry as lines for difflib, or None when it is binary (NUL byte or not UTF-8)."""
    if entry is None:
        return []
    if b"\x00" in entry.data:
        return None
    try:
        text = entry.data.decode()
    except UnicodeDecodeError:
        return None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def render_change(change: FileChange) -> str:
    """One file's section of the patch, in the shape `git apply` understands."""
    a, b = f"a/{change.path}", f"b/{change.path}"
    head = [f"diff --git {a} {b}\n"]
    if change.kind == "added" and change.new is not None:
        head.append(f"new file mode {_mode(change.new)}\n")
    elif change.kind == "deleted" and change.old is not None:
        head.append(f"deleted file mode {_mode(change.old)}\n")
    elif change.old is not None and change.new is not None and _mode(change.old) != _mode(change.new):
        head += [f"old mode {_mode(change.old)}\n", f"new mode {_mode(change.new)}\n"]
    old_lines, new_lines = _text_lines(change.old), _text_lines(change.new)
    if old_lines is None or new_lines is None:
        return "".join(head) + f"Binary files {a} and {b} differ\n"
    from_name = "/dev/null" if change.kind == "added" else a
    to_name = "/dev/null" if change.kind == "deleted" else b
    body = list(difflib.unified_diff(old_lines, new_lines, from_name, to_name))
    return "".join(head + body)


def patch_paths(patch: str) -> tuple[str, ...]:
    """Every path a patch's headers name, so the engine can judge each write before `git apply` runs.

    Only the shape this module writes is accepted: `diff --git a/P b/P` with the same P, `---`/`+++`
    names before the first hunk, no renames or copies, no quoted names, nothing absolute, no `..`,
    no `.git` folder at any depth. Anything else is refused rather than half-understood.
    """
    paths: list[str] = []
    in_header = False
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            in_header = True
            names = [_header_path(line[len("diff --git ") :])]
        elif in_header and line.startswith(("--- ", "+++ ")):
            name = line[4:]
            names = [] if name == "/dev/null" else [_side_path(name)]
        elif in_header and line.startswith(("rename ", "copy ")):
            raise WorkspaceError(f"refusing a patch with {line.split()[0]} headers")
        else:
            in_header = in_header and not line.startswith("@@")
            continue
        for rel in names:
            if rel not in paths:
                paths.append(rel)
    if not paths:
        raise WorkspaceError("not a patch: no 'diff --git' sections found")
    return tuple(paths)


def _header_path(rest: str) -> str:
    half = (len(rest) - 5) // 2  # rest is "a/P b/P"
    rel = rest[2 : 2 + half]
    if rest != f"a/{rel} b/{rel}":
        raise WorkspaceError(f"refusing a patch header it cannot read: diff --git {rest}")
    return _checked(rel)


def _side_path(name: str) -> str:
    if not name.startswith(("a/", "b/")):
        raise WorkspaceError(f"refusing a patch file name it cannot read: {name!r}")
    return _checked(name[2:])


def _checked(rel: str) -> str:
    parts = PurePosixPath(rel).parts
    if rel.startswith(("/", '"')) or not parts or ".." in parts or ".git" in parts or "\t" in rel:
        raise WorkspaceError(f"refusing a patch that touches {rel!r} outside the source tree")
    return rel


def apply_patch_to_source(patch: str, source: Path) -> None:
    """Apply `patch` to `source` with `git apply`: checked first, then applied as a whole or not at all.

    git refuses paths beyond a symlink and hunks whose context moved, so a source that changed
    since the run started is reported as a conflict instead of being overwritten.
    """
    patch_paths(patch)
    if not source.is_dir():
        raise WorkspaceError(f"source {source} is not a directory")
    # Trusted git (orchestrator.repos.trusted_git): no hook, no global/system config, HOME empty; a
    # `.gitconfig` or hook the patch carries is only file content here.
    for extra in (["--check"], []):
        try:
            run_git(
                ["apply", "--whitespace=nowarn", *extra, "-"], cwd=source, stdin=patch.encode(), timeout=120
            )
        except GitError as exc:
            detail = exc.stderr or str(exc)
            raise PatchConflict(
                f"the patch does not apply to {source}: {detail}", paths=patch_paths(patch)
            ) from None
