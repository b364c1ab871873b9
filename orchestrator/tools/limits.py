"""Resource limits for a command's whole process tree, and naming the one a command ran into.

bubblewrap sets none itself. The limits are set in the child before it executes bubblewrap, so
bubblewrap and everything the command starts inherit them: `RLIMIT_NPROC` (processes),
`RLIMIT_DATA` (private writable memory per process: what a memory bomb allocates; not `RLIMIT_AS`,
which also counts address space merely reserved, so Node's WebAssembly or a JVM would not start),
`RLIMIT_FSIZE` (largest file written), `RLIMIT_CPU` (CPU seconds per process) and `RLIMIT_NOFILE`.
Inside the sandbox's user namespace the command cannot raise them back.

`RLIMIT_NPROC` counts the processes of a user, and the kernel exempts the global root user from
it; so where the host delegates a cgroup (v2, or v1's `pids` hierarchy writable), each command also
gets its own cgroup with `pids.max` (and `memory.max` on v2), which counts exactly the command's
tree, tells whether the limit was hit, and is removed with every process left in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import resource
import signal
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_CGROUP_FS = Path("/sys/fs/cgroup")
_MIB = 1 << 20
_CPU_GRACE_S = 5
_WATCH_POLL_S = 0.1  # how often a running command's disk use and process limit are read


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one command's tree may use; 0 leaves that limit unset."""

    processes: int = 512
    memory_bytes: int = 1536 * _MIB
    file_bytes: int = 512 * _MIB
    cpu_seconds: int = 600
    open_files: int = 1024
    tmp_bytes: int = 512 * _MIB  # the sandbox's /tmp (and HOME) tmpfs
    # Disk the command may take on the workspace's filesystem (its free space, watched while it
    # runs; the tree is killed past it): many files each under `file_bytes` cannot fill the disk.
    disk_bytes: int = 1024 * _MIB

    def rlimits(self) -> list[tuple[int, int]]:
        """(resource, value) pairs for `setrlimit`, soft and hard alike."""
        pairs = [
            (resource.RLIMIT_NPROC, self.processes),
            (resource.RLIMIT_DATA, self.memory_bytes),
            (resource.RLIMIT_FSIZE, self.file_bytes),
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_NOFILE, self.open_files),
        ]
        return [(kind, value) for kind, value in pairs if value > 0]


DEFAULT_LIMITS = Limits()


def _apply(pairs: list[tuple[int, int]], cgroup_procs: str | None) -> None:
    """Runs in the forked child before exec: join the cgroup, then lower the limits."""
    if cgroup_procs is not None:
        fd = os.open(cgroup_procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
    for kind, value in pairs:
        _soft, hard = resource.getrlimit(kind)
        top = value if hard == resource.RLIM_INFINITY else min(value, hard)
        # CPU: SIGXCPU (named in the result) at the soft limit, SIGKILL a little later at the hard one.
        ceiling = top + _CPU_GRACE_S if kind == resource.RLIMIT_CPU else top
        if hard != resource.RLIM_INFINITY:
            ceiling = min(ceiling, hard)
        resource.setrlimit(kind, (top, ceiling))


class CommandCgroup:
    """A per-command cgroup under a delegated one (None from `create` where there is none)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, limits: Limits) -> CommandCgroup | None:
        """A fresh cgroup with the limits set, or None when this host delegates none to us."""
        if limits.processes <= 0:
            return None
        for base in delegated_bases():
            path = base / f"massgen-{uuid.uuid4().hex[:12]}"
            try:
                path.mkdir()
            except OSError:
                continue
            group = cls(path)
            try:
                (path / "pids.max").write_text(str(limits.processes))
                if limits.memory_bytes > 0 and (path / "memory.max").exists():
                    (path / "memory.max").write_text(str(limits.memory_bytes))
            except OSError:
                group.remove()
                continue
            return group
        return None

    def pids_hit(self) -> bool:
        """Whether a fork was refused because the command reached `pids.max`."""
        return _event_count(self.path / "pids.events", "max") > 0

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the command for reaching `memory.max`."""
        return _event_count(self.path / "memory.events", "oom_kill") > 0

    def remove(self) -> None:
        """Kill whatever is left in the cgroup, then remove it."""
        kill = self.path / "cgroup.kill"
        for _ in range(50):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            if not pids:
                break
            if kill.exists():
                with contextlib.suppress(OSError):
                    kill.write_text("1")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.sched_yield()
        with contextlib.suppress(OSError):
            self.path.rmdir()


_BASES: list[Path] | None = None


def delegated_bases() -> list[Path]:
    """Cgroups this process may create children in that have a `pids` controller (cached)."""
    global _BASES
    if _BASES is None:
        _BASES = [base for base in _candidate_bases() if _usable(base)]
    return _BASES


def _candidate_bases() -> list[Path]:
    found: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        number, _, rest = line.partition(":")
        controllers, _, where = rest.partition(":")
        where = where.lstrip("/")
        if number == "0" and not controllers:  # cgroup v2 (unified)
            for mount in (_CGROUP_FS, _CGROUP_FS / "unified"):
                if (mount / "cgroup.controllers").exists():
                    found.append(mount / where)
        elif "pids" in controllers.split(","):
            found.append(_CGROUP_FS / "pids" / where)
    return found


def _usable(base: Path) -> bool:
    probe = base / f"massgen-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / "pids.max").exists() and os.access(probe / "cgroup.procs", os.W_OK)
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def _event_count(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name and value.strip().isdigit():
                return int(value)
    except OSError:
        return 0
    return 0


def preexec(limits: Limits, cgroup: CommandCgroup | None) -> Callable[[], None]:
    """The `preexec_fn` that applies `limits` (and joins `cgroup`) in the child before exec."""
    pairs = limits.rlimits()
    procs = str(cgroup.path / "cgroup.procs") if cgroup is not None else None
    return lambda: _apply(pairs, procs)


_FORK_FAILED = re.compile(
    r"fork: (retry|Resource temporarily unavailable)|Cannot fork|can't start new thread|"
    r"BlockingIOError: \[Errno 11\]"
)
# What a shell says when its fork is refused: what stops the tree where no cgroup counts it (not
# Python's EAGAIN, which a non-blocking socket raises too).
_SHELL_FORK_REFUSED = re.compile(rb"fork: (retry: )?Resource temporarily unavailable|Cannot fork")
_NO_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|cannot allocate|bad_alloc|out of memory", re.I)
_FILE_SIZE = re.compile(r"File size limit exceeded|File too large")
_CPU = re.compile(r"CPU time limit exceeded")
_OPEN_FILES = re.compile(r"Too many open files")
_NO_SPACE = re.compile(r"No space left on device")
_SIGXCPU, _SIGXFSZ = int(signal.SIGXCPU), int(signal.SIGXFSZ)


def disk_taken(path: Path, since: int) -> int:
    """Bytes of free space `path`'s filesystem lost since `since` (a `disk_free` reading)."""
    return since - disk_free(path)


def disk_free(path: Path) -> int:
    """Bytes free to an unprivileged writer on `path`'s filesystem."""
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def limits_hit(
    limits: Limits,
    output: str,
    exit_code: int | None,
    cgroup: CommandCgroup | None = None,
    *,
    disk_hit: bool = False,
    processes_hit: bool = False,
) -> tuple[str, ...]:
    """Which limits the command ran into, each as the sentence the agent and the thread see."""
    signalled = {abs(exit_code) if exit_code < 0 else exit_code - 128} if exit_code is not None else set()
    hit: list[str] = []
    if disk_hit:
        hit.append(f"disk limit ({limits.disk_bytes // _MIB} MiB written to the workspace) reached")
    if processes_hit or (cgroup is not None and cgroup.pids_hit()) or _FORK_FAILED.search(output):
        hit.append(f"process limit ({limits.processes}) reached")
    if (cgroup is not None and cgroup.oom_killed()) or _NO_MEMORY.search(output):
        hit.append(f"memory limit ({limits.memory_bytes // _MIB} MiB) reached")
    if _SIGXFSZ in signalled or _FILE_SIZE.search(output):
        hit.append(f"file size limit ({limits.file_bytes // _MIB} MiB) reached")
    if _SIGXCPU in signalled or _CPU.search(output):
        hit.append(f"CPU time limit ({limits.cpu_seconds} s) reached")
    if _OPEN_FILES.search(output):
        hit.append(f"open files limit ({limits.open_files}) reached")
    if _NO_SPACE.search(output):
        hit.append(
            f"no space left on a device (the sandbox's /tmp and HOME hold {limits.tmp_bytes // _MIB} MiB)"
        )
    return tuple(hit)


class LimitWatch:
    """Kills the command's tree once it runs into its process limit or takes too much disk.

    A tree that reached its process limit is stopped at once rather than left to churn: bash
    retries a refused fork for 15 s and carries on as soon as a child exits, so a fork bomb would
    otherwise run until the command timeout. The limit is read from the cgroup's `pids.events`
    where there is one, else from the fork failures the output reports (`fork_refused`). The disk
    is the workspace filesystem's free space, against what it was when the command started.
    """

    def __init__(
        self,
        workspace: Path,
        limits: Limits,
        proc: asyncio.subprocess.Process,
        *,
        cgroup: CommandCgroup | None,
        fork_refused: Callable[[], bool],
    ) -> None:
        self.disk_hit = False
        self.processes_hit = False
        self._workspace, self._limits, self._proc = workspace, limits, proc
        self._cgroup, self._fork_refused = cgroup, fork_refused
        self._task = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        limits, workspace, proc = self._limits, self._workspace, self._proc
        start = disk_free(workspace) if limits.disk_bytes > 0 else 0
        while proc.returncode is None:
            await asyncio.sleep(_WATCH_POLL_S)
            if limits.disk_bytes > 0 and disk_taken(workspace, start) > limits.disk_bytes:
                self.disk_hit = True
            elif limits.processes > 0 and (self._fork_refused() or self._pids_hit()):
                self.processes_hit = True
            else:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return

    def _pids_hit(self) -> bool:
        return self._cgroup is not None and self._cgroup.pids_hit()

    def stop(self) -> None:
        """The command ended: stop watching."""
        self._task.cancel()


def fork_refused(chunk: bytes) -> bool:
    """Whether a piece of a command's output has a shell reporting a refused fork (the process limit)."""
    return _SHELL_FORK_REFUSED.search(chunk) is not None
