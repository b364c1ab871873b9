"""Git as trusted code on trusted state: no hooks, no config an agent could have written.

Every git step that runs with more than the sandbox's rights (fetching a mirror, committing the
winner's patch, pushing, applying a patch back) goes through `run_git`. Its environment ignores the
system and global config files and points HOME at an empty folder, so no `.gitconfig` an agent
planted (in the workspace, which is the sandbox's HOME, or in a patch) is ever read; the command
line pins the settings that could run a program (`core.hooksPath`, `core.fsmonitor`,
`core.sshCommand`, credential helpers). It never runs inside an agent's workspace: callers operate
on the bot's own mirror and on fresh worktrees made from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import OrchestratorError

# `-c` settings on every call: each names a way a config value makes git run a program.
PINNED: tuple[str, ...] = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=",
    "core.sshCommand=ssh",
    "core.pager=cat",
    "credential.helper=",
    "protocol.ext.allow=never",
    "safe.directory=*",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "core.askPass=",
    "init.templateDir=",
)
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")
GIT_TIMEOUT_S = 300.0


class GitError(OrchestratorError):
    """A trusted git step failed; `args` and git's own message say which and why."""

    def __init__(self, message: str, *, argv: Sequence[str] = (), stderr: str = "") -> None:
        super().__init__(message)
        self.argv = tuple(argv)
        self.stderr = stderr


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """A git author or committer."""

    name: str
    email: str


BOT = Identity(name="massgen-bot", email="massgen-bot@users.noreply.local")


def requester_identity(requester: str | None) -> Identity:
    """The author for a requester's id (an opaque surface id, e.g. a Slack user id)."""
    if not requester:
        return BOT
    safe = "".join(ch for ch in requester if ch.isalnum() or ch in "-_.")[:64] or "unknown"
    return Identity(name=safe, email=f"{safe}@users.noreply.local")


def trusted_env(
    home: Path,
    *,
    author: Identity = BOT,
    committer: Identity = BOT,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of a trusted git call (nothing else of the bot's is inherited)."""
    env = {key: os.environ[key] for key in _KEPT_ENV if key in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "GIT_AUTHOR_NAME": author.name,
            "GIT_AUTHOR_EMAIL": author.email,
            "GIT_COMMITTER_NAME": committer.name,
            "GIT_COMMITTER_EMAIL": committer.email,
        }
    )
    env.update(extra or {})
    return env


def git_argv(args: Sequence[str], *, git_dir: Path | None = None, work_tree: Path | None = None) -> list[str]:
    """The argv of one trusted git call (the pinned settings first)."""
    git = shutil.which("git")
    if git is None:
        raise GitError("git is needed for repositories and was not found")
    argv = [git]
    for setting in PINNED:
        argv += ["-c", setting]
    if git_dir is not None:
        argv.append(f"--git-dir={git_dir}")
    if work_tree is not None:  # a work tree for a bare mirror: the mirror's `core.bare` must yield
        argv += ["-c", "core.bare=false", f"--work-tree={work_tree}"]
    return [*argv, *args]


def run_git(
    args: Sequence[str],
    *,
    cwd: Path,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    author: Identity = BOT,
    committer: Identity = BOT,
    extra_env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> str:
    """Run one git command with the trusted environment; its stdout, or `GitError` with git's message."""
    argv = git_argv(args, git_dir=git_dir, work_tree=work_tree)
    with tempfile.TemporaryDirectory(prefix="massgen-git-home-") as home:
        env = trusted_env(Path(home), author=author, committer=committer, extra=extra_env)
        try:
            proc = subprocess.run(  # fixed argv, no shell; input only through stdin
                argv, cwd=cwd, env=env, input=stdin, capture_output=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"git {args[0]} timed out after {timeout:.0f} s", argv=argv) from exc
    if proc.returncode != 0:
        stderr = _redact(proc.stderr.decode(errors="replace").strip())
        raise GitError(f"git {args[0]} failed: {stderr[-800:]}", argv=argv, stderr=stderr)
    return proc.stdout.decode(errors="replace")


def plain_tree_path(rel: str) -> bool:
    """A path of a tree that stays inside it: no empty, `.` or `..` part, nothing under `.git`.

    A checkout never writes such a path, but a crafted tree object (from a remote that sends one;
    fetches do not fsck by default) can name one, and what removes or rewrites a tree's paths by
    name must not reach outside it for it.
    """
    return all(part not in {"", ".", "..", ".git"} for part in rel.split("/"))


def through_link(root: Path, rel: str) -> bool:
    """Whether a folder on the way from `root` to `rel` is a symlink (the path is not in the tree)."""
    folder = root
    for part in rel.split("/")[:-1]:
        folder = folder / part
        if folder.is_symlink():
            return True
    return False


def _redact(text: str) -> str:
    """Credentials in a URL (`https://user:token@host`) never reach a message or a log."""
    out, start = [], 0
    while True:
        scheme = text.find("://", start)
        if scheme < 0:
            out.append(text[start:])
            return "".join(out)
        at = text.find("@", scheme)
        stop = min((i for i in (text.find(c, scheme + 3) for c in " /\n'\"") if i >= 0), default=len(text))
        if 0 <= at < stop:
            out.append(text[start : scheme + 3] + "***")
            start = at
        else:
            out.append(text[start : scheme + 3])
            start = scheme + 3
