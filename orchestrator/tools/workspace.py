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
import fnmatch
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from orchestrator.config.team import WorkspaceConfig
from orchestrator.errors import PatchConflict, WorkspaceError
from orchestrator.repos.mirror import is_base_tree
from orchestrator.repos.trusted_git import GitError, run_git

ChangeKind = Literal["added", "modified", "deleted"]
_SKIP_DIRS = frozenset({".git"})  # repository internals are not part of the patch
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
            if source is not None:
                # A repository's commit tree is immutable and the snapshot is only read: linked, not
                # copied. Agents write in place, so theirs are real copies of it.
                copy_tree(source, spaces.snapshot, link=is_base_tree(source))
                if secrets:
                    drop_secrets(spaces.snapshot, secrets)
            for agent_id in spaces.agent_ids:
                if source is None:
                    spaces.path(agent_id).mkdir()
                else:
                    copy_tree(spaces.snapshot, spaces.path(agent_id))
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
        before = _stats(top_before) if self.source is not None else {}
        after = _stats(top_after)
        changes: list[FileChange] = []
        for rel in sorted(before.keys() | after.keys()):
            b, a = before.get(rel), after.get(rel)
            if b is not None and a is not None and _same_stat(b, a):
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


def copy_tree(source: Path, target: Path, *, link: bool = False) -> None:
    """Copy a directory, symlinks kept as links; GNU `cp -a` is about five times faster than copytree.

    `link`: hard links instead of copies (`cp -al`, about 20x faster again), for a source nobody
    writes, read by a target nobody writes in place either.
    """
    cp = shutil.which("cp")
    if cp is None:
        shutil.copytree(source, target, symlinks=True, copy_function=os.link if link else shutil.copy2)
        return
    how = ["-al"] if link else ["-a", "--reflink=auto"]
    proc = subprocess.run([cp, *how, "--", str(source), str(target)], capture_output=True, check=False)
    if proc.returncode != 0:
        raise OSError(f"copying {source} failed: {proc.stderr.decode(errors='replace').strip()}")


def secret_patterns(config: WorkspaceConfig) -> tuple[str, ...] | None:
    """The name patterns left out of workspaces: the built-in list plus the team's (None: copy all)."""
    return None if config.copy_secrets else (*SECRET_FILES, *config.secrets)


def is_secret_name(name: str, patterns: Sequence[str]) -> bool:
    """Whether a file or folder called `name` is a secrets file by one of `patterns`."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def drop_secrets(top: Path, patterns: Sequence[str]) -> list[str]:
    """Remove every file or folder under `top` whose name matches a pattern; the relative paths removed."""
    removed: list[str] = []
    for folder, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            if is_secret_name(name, patterns):
                path = Path(folder) / name
                removed.append(str(path.relative_to(top)))
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        dirs[:] = [d for d in dirs if (Path(folder) / d).is_dir() and not (Path(folder) / d).is_symlink()]
    return removed


def _check_name(value: str, what: str) -> None:
    # These become directory names: one plain path component, nothing that climbs out.
    bad = value in {".", "..", ".massgen-snapshot.json"} or value.endswith(".source")
    if not value or bad or "/" in value or "\x00" in value:
        raise WorkspaceError(f"{what} {value!r} cannot name a workspace directory")


def _stats(top: Path) -> dict[str, os.stat_result]:
    return dict(_walk(top, top))


def _walk(top: Path, directory: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of every file and symlink; never follows links, skips `.git`."""
    try:
        items = sorted(os.scandir(directory), key=lambda item: item.name)
    except FileNotFoundError:
        return
    for item in items:
        info = item.stat(follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            if item.name not in _SKIP_DIRS:
                yield from _walk(top, Path(item.path))
        elif stat.S_ISLNK(info.st_mode) or stat.S_ISREG(info.st_mode):
            yield Path(item.path).relative_to(top).as_posix(), info


def _same_stat(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_mode, a.st_size, a.st_mtime_ns) == (b.st_mode, b.st_size, b.st_mtime_ns)


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
