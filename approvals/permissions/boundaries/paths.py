"""Path boundaries: the workspace, read-only roots, secrets, protected files and block devices.

`os.path.realpath` here is the only I/O in the core: a symlink is inside only if the link *and*
its target are, and it is a secret if either is.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import pwd
import re
from dataclasses import dataclass
from typing import Literal

from approvals.permissions.budget import spend
from approvals.permissions.model import Risk, Verdict
from approvals.permissions.shell.words import UNKNOWN

PathClass = Literal[
    "inside", "readable", "outside", "secret", "protected", "device", "network", "null", "unknown"
]

# Secret locations under the home directory (dirs cover everything beneath them).
_HOME_SECRETS = (
    ".ssh", ".aws", ".config/gcloud", ".gnupg", ".kube", ".docker/config.json", ".azure",
    ".password-store", ".config/gh", ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass",
    ".my.cnf", ".boto", ".s3cfg", ".vault-token", ".terraform.d", ".cargo/credentials",
    ".cargo/credentials.toml", ".gem/credentials", ".config/op", ".bashrc", ".bash_profile",
    ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zprofile", ".zshenv", ".zlogin",
    ".zlogout", ".config/fish", ".bash_history", ".zsh_history", ".python_history",
    ".local/share/keyrings", ".config/Slack", ".gitconfig", ".config/git", ".m2/settings.xml",
    ".gradle/gradle.properties", ".config/hub", ".terraformrc", ".config/rclone", ".config/doctl",
    ".oci", ".config/heroku", ".netlify", ".fly", ".wrangler", ".config/gh-copilot", ".ansible/vault",
)  # fmt: skip
_ABSOLUTE_SECRETS = (
    "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh",
    "/root", "/etc/ssl/private", "/etc/profile", "/etc/profile.d", "/etc/bash.bashrc", "/etc/environment",
    "/etc/zsh",
    "/etc/zshrc", "/var/run/secrets", "/run/secrets", "/etc/security/opasswd", "/etc/master.passwd",
)  # fmt: skip
# File names that are secrets wherever they are (matched case-insensitively on the basename).
_SECRET_NAMES = (
    ".env", ".env.*", "*.env", ".envrc", "*.pem", "*.key", "id_rsa", "id_dsa*", "id_ecdsa*", "id_ed25519",
    "id_rsa_*", "id_ed25519_*", "*.p12", "*.pfx", "*.jks", "*.keystore", ".netrc", "_netrc", ".pgpass",
    ".git-credentials", ".npmrc", ".pypirc", ".htpasswd", "*.kdbx", "credentials", "credentials.json",
    "*.ppk", "secring.*", "*.tfvars", ".vault-token", "secrets.yml", "secrets.yaml", "secrets.json",
    ".bashrc", ".zshrc", ".bash_profile",
    ".profile", ".zprofile", ".zshenv", "authorized_keys", "known_hosts", "*_history",
    # Every spelling of an env file (`.env~`, `.env_prod`), state and service-account files.
    ".env*", "*.tfstate", "*.tfstate.*", "service-account*.json", "service_account*.json",
    "client_secret*.json", "*-credentials.json", "*.p8", "*.keytab", ".secrets", "secrets.toml",
    "secret.yaml", "secret.yml", ".dockercfg", "kubeconfig", "*.kubeconfig", ".my.cnf", ".s3cfg", ".boto",
)  # fmt: skip
_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".defaults", ".tmpl", ".in")
# Any process's environment or memory, through any /proc path (`/proc/self/task/1/environ`).
_SECRET_PROC = re.compile(r"^/proc/(?:[^/]+/){1,6}(environ|mem|maps|cmdline|auxv)$")
_PROC_EXAMPLES = ("/proc/self/environ", "/proc/1/environ", "/proc/self/task/1/environ", "/proc/1/mem")
_SAFE_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/stdin",
     "/dev/stdout", "/dev/stderr", "/dev/ptmx"}
)  # fmt: skip
_SAFE_DEVICE_DIRS = ("/dev/fd/", "/dev/pts/", "/dev/shm/")  # noqa: S108 (names, not file use)
_GLOB_CHARS = re.compile(r"[*?\[]")
_MAX_PATH = 4096
_MAX_COMPONENTS = 512


_SECRET_NAME_RE = re.compile("|".join(fnmatch.translate(n) for n in _SECRET_NAMES))


@functools.lru_cache(maxsize=16)
def _secret_locations(home: str) -> re.Pattern[str]:
    """One anchored regex for every secret directory or file (a separator guard after each)."""
    roots = [f"{home}/{rel}" for rel in _HOME_SECRETS] + list(_ABSOLUTE_SECRETS)
    # Case-insensitive: on macOS `~/.SSH` is `~/.ssh`; elsewhere asking about `~/.Docker` costs nothing.
    return re.compile("(" + "|".join(re.escape(r) for r in roots) + ")(?:/|$)", re.IGNORECASE)


# Work steps one glob judgment spends (budget.spend): at most 50 distinct globs per decision.
_GLOB_WORK = 500
# And one path judged in one directory (resolved, symlinks followed): about 1,000 per decision.
_PATH_WORK = 25


@dataclass(frozen=True, slots=True)
class PathVerdict:
    """What the boundary says about one path access."""

    verdict: Verdict
    risk: Risk
    klass: PathClass
    path: str
    reason: str

    @property
    def sensitive(self) -> bool:
        """Secrets and protected files are never resolved by automation or run grants."""
        return self.klass in ("secret", "protected")


@dataclass(frozen=True, slots=True)
class Boundary:
    """Where an agent may read and write without asking."""

    workspace: str
    home: str
    readable_roots: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    # The workspace as configured, when a symlink makes it differ from `workspace` (macOS /tmp).
    workspace_alias: str | None = None

    @classmethod
    def create(
        cls, workspace: str, home: str, readable_roots: tuple[str, ...] = (), protected: tuple[str, ...] = ()
    ) -> Boundary:
        """Normalise the roots once (absolute, symlinks resolved)."""
        real = os.path.realpath(workspace)
        given = posixpath.normpath(workspace)
        return cls(
            workspace=real,
            home=posixpath.normpath(home),
            readable_roots=tuple(os.path.realpath(r) for r in readable_roots),
            protected=protected,
            workspace_alias=given if given != real else None,
        )

    def absolute(self, text: str, cwd: str | None = None) -> str:
        """The absolute path the kernel will act on: `~` expanded, `..` taken physically.

        Relative to `cwd` (default: the workspace); `..` as the kernel takes it, after the symlinks
        before it.

        `docs/host/../usr` with `docs/host -> /etc` is `/usr`, not `docs/usr`: folding `..`
        lexically first would judge a place the command never touches. The last component is kept
        as written (an unlink or a write acts on a link itself, not on its target); the floor,
        the boundary and the rules all see this one path.
        """
        if text == "~" or text.startswith("~/"):
            text = self.home + text[1:]
        elif text.startswith("~"):
            user, _, rest = text[1:].partition("/")
            # The configured home's owner is a user even where the host has no entry for it.
            home = _home_of(user) or (self.home if posixpath.basename(self.home) == user else None)
            if home is not None:  # bash leaves `~name` as written when there is no such user
                text = posixpath.join(home, rest)
        path = posixpath.join(cwd or self.workspace, text)
        if ".." in path.split("/"):
            path = _physical(path)
        path = posixpath.normpath(path)
        path = "/" + path.lstrip("/") if path.startswith("//") else path
        alias = self.workspace_alias
        if alias is not None and _within(path, alias):
            path = self.workspace + path[len(alias) :]
        return path

    def is_real(self, path: str) -> bool:
        """True when no symlink is on the (absolute, normalised) path: `..` then means what it says."""
        return os.path.realpath(path) == path

    def judge(self, text: str, *, write: bool, cwd: str | None = None) -> PathVerdict:
        """Judge one read or write of a path as written in a command or tool call."""
        spend(_PATH_WORK, "path judgments")
        if len(text) > _MAX_PATH or text.count("/") > _MAX_COMPONENTS:
            # Longer than any path the kernel resolves (PATH_MAX): never resolved, asked.
            return PathVerdict("ask", "high", "unknown", text[:64] + "…", "a path too long to resolve")
        if UNKNOWN in text or cwd == UNKNOWN:
            return self._judge_unknown(text, write=write, cwd=cwd)
        lexical = self.absolute(text, cwd)
        if _GLOB_CHARS.search(lexical):
            return self._judge_glob(lexical, write=write)
        real = os.path.realpath(lexical)
        return self._judge_resolved(lexical, real, write=write)

    def _judge_unknown(self, text: str, *, write: bool, cwd: str | None) -> PathVerdict:
        """A path with a part computed at run time: ask; a secret if its known prefix is one."""
        shown = text.replace(UNKNOWN, "$?")
        known = text.split(UNKNOWN, 1)[0]
        if cwd != UNKNOWN and "/" in known:
            prefix = self.absolute(known.rsplit("/", 1)[0] or "/", cwd)
            if self.secret_reason(prefix) or prefix.startswith("/proc"):
                return PathVerdict("ask", "high", "secret", shown, "a computed path under a secret location")
        # High for reads too: a name computed at run time may be a secret, so automation never allows it.
        return PathVerdict("ask", "high", "unknown", shown, "path computed at run time")

    def _judge_resolved(self, lexical: str, real: str, *, write: bool) -> PathVerdict:
        for path in (lexical, real):
            special = self._special(path, write=write)
            if special is not None:
                return special
        inside = _within(lexical, self.workspace) and _within(real, self.workspace)
        if inside:
            for path in (lexical, real):
                if write and self._is_protected(path):
                    return PathVerdict("ask", "high", "protected", path, "writes a protected file")
            return PathVerdict("allow", "low", "inside", real, "inside the workspace")
        readable = any(_within(lexical, r) and _within(real, r) for r in self.readable_roots)
        if readable and not write:
            return PathVerdict("allow", "low", "readable", real, "inside a read-only root")
        if write:
            return PathVerdict("ask", "high", "outside", real, "writes outside the workspace")
        return PathVerdict("ask", "medium", "outside", real, "reads outside the workspace")

    def _special(self, path: str, *, write: bool) -> PathVerdict | None:
        reason = self.secret_reason(path)
        if reason is not None:
            return PathVerdict("ask", "high", "secret", path, reason)
        if path in _SAFE_DEVICES or path.startswith(_SAFE_DEVICE_DIRS):
            return PathVerdict("allow", "low", "null", path, "a harmless device")
        if path.startswith(("/dev/tcp/", "/dev/udp/")):
            return PathVerdict("ask", "high", "network", path, "opens a network connection via /dev/tcp")
        if path.startswith("/dev/") and write:
            return PathVerdict("deny", "critical", "device", path, "writes a raw device")
        return None

    def _judge_glob(self, pattern: str, *, write: bool) -> PathVerdict:
        """A glob is judged by its fixed directory prefix, and as a secret if it can name one."""
        # Each new glob compiles a pattern per secret name (about half a millisecond): counted.
        spend(_GLOB_WORK, "glob patterns")
        if self._glob_hits_secret(pattern):
            return PathVerdict("ask", "high", "secret", pattern, "a glob that can match a secret file")
        parts = pattern.split("/")
        fixed = "/".join(p for p in parts[: next(i for i, p in enumerate(parts) if _GLOB_CHARS.search(p))])
        prefix = fixed or "/"
        if pattern.startswith("/dev/") and write:
            return PathVerdict("deny", "critical", "device", pattern, "writes raw devices")
        verdict = self._judge_resolved(prefix, os.path.realpath(prefix), write=write)
        if (
            verdict.klass == "inside"
            and write
            and any(fnmatch.fnmatchcase(p, pattern) for p in self._protected_abs())
        ):
            return PathVerdict("ask", "high", "protected", pattern, "a glob that can match a protected file")
        return PathVerdict(verdict.verdict, verdict.risk, verdict.klass, pattern, verdict.reason)

    def _glob_hits_secret(self, pattern: str) -> bool:
        base = posixpath.basename(pattern)
        if base.startswith(".") and any(
            fnmatch.fnmatchcase(n.replace("*", "x"), base) for n in _SECRET_NAMES
        ):
            return True  # `cat .*` names `.env` and `.netrc` (but `cat *` skips hidden files)
        if re.search(r"[A-Za-z0-9]", base) and any(
            fnmatch.fnmatchcase(name.replace("*", "x"), base.lower()) for name in _SECRET_NAMES
        ):
            return True
        literal = [self.home + "/" + p for p in _HOME_SECRETS] + [*_ABSOLUTE_SECRETS, *_PROC_EXAMPLES]
        return any(fnmatch.fnmatchcase(p, pattern) or fnmatch.fnmatchcase(p + "/x", pattern) for p in literal)

    def holds_secrets(self, path: str) -> bool:
        """A directory that contains a secret location (`/`, home, /etc, ~/.config, …)."""
        prefix = path.rstrip("/") + "/"
        roots = [f"{self.home}/{rel}" for rel in _HOME_SECRETS] + list(_ABSOLUTE_SECRETS)
        return path == "/" or any(r.startswith(prefix) for r in roots)

    def secret_reason(self, path: str) -> str | None:
        """Why a (normalised, absolute) path is a secret, or None."""
        match = _secret_locations(self.home).match(path)
        if match:
            return f"secret location {match.group(1).replace(self.home, '~', 1)}"
        if _SECRET_PROC.match(path):
            return "process environment or memory"
        base = posixpath.basename(path).lower()
        if not base.endswith(_TEMPLATE_SUFFIXES) and _SECRET_NAME_RE.match(base):
            return f"secret file {base}"
        return None

    def _protected_abs(self) -> list[str]:
        return [posixpath.join(self.workspace, p) for p in self.protected]

    def _is_protected(self, path: str) -> bool:
        # Only called for paths inside the workspace: a prefix cut is the relative path.
        rel = (
            path[len(self.workspace) :].lstrip("/") or "."
            if _within(path, self.workspace)
            else posixpath.relpath(path, self.workspace)
        )
        if ".git" in rel.split("/"):  # a repository's internals at any depth (hooks, config, objects)
            return True
        for pattern in self.protected:
            stem = pattern[:-3] if pattern.endswith("/**") else pattern
            if rel == stem or _within(rel, stem) or fnmatch.fnmatchcase(rel, pattern):
                return True
        return False


_USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?")


@functools.lru_cache(maxsize=256)
def _home_of(user: str) -> str | None:
    """Where bash expands `~user`: that user's home; None (left as written) when there is none.

    `~+`, `~-` and names that are not user names keep a home-like place outside the workspace, so
    they are judged as outside (asked), never as a relative name.
    """
    if not _USER_NAME.fullmatch(user):
        return f"/home/{user}"
    try:
        return pwd.getpwnam(user).pw_dir or "/"
    except KeyError:
        return None


def _physical(path: str) -> str:
    """`path` with its folders resolved as the kernel walks them (symlinks, then `..`).

    Its last component stays as written; a last `..` or `.` resolves fully (the folder it names).
    """
    head, last = posixpath.split(path)
    if last in ("", ".", ".."):
        return os.path.realpath(path)
    return posixpath.join(os.path.realpath(head or "/"), last)


def is_raw_device(path: str) -> bool:
    """A device node whose overwrite destroys data (disks, memory); not /dev/null, ttys or /dev/tcp."""
    if not path.startswith("/dev/") or path in _SAFE_DEVICES or path.startswith(_SAFE_DEVICE_DIRS):
        return False
    return not path.startswith(("/dev/tcp/", "/dev/udp/"))


def _within(path: str, root: str) -> bool:
    """`path` is `root` or below it (separator-guarded, so /etc/pass does not match /etc/passwd)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def within(path: str, root: str) -> bool:
    """Public form of the separator-guarded containment test."""
    return _within(path, root)
