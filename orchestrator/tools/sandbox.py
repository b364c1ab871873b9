"""Run one shell command confined by bubblewrap: read-only system, writable workspace, no network.

The engine judges the command text; this is the second wall behind it (pitfall 7: `python -c
"open('.env')"` slips past any text rule, so the OS must refuse what the rules cannot see). A
command that is approved as egress gets the network; nothing else does. The environment is
rebuilt from scratch so no API key or token of the bot reaches an agent's command.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from orchestrator.errors import SandboxUnavailable
from orchestrator.tools.limits import (
    DEFAULT_LIMITS,
    CommandCgroup,
    Limits,
    LimitWatch,
    fork_refused,
    limits_hit,
    preexec,
)
from orchestrator.tools.proxy import BRIDGE, DEFAULT_EGRESS, PROXY_PORT, EgressRules
from orchestrator.tools.sandbox_probe import bwrap_candidates, choose_bwrap, is_executable
from orchestrator.tools.seccomp import unix_socket_filter
from orchestrator.tools.sockets import host_sockets, socket_dirs
from orchestrator.tools.unconfined import OK_WARNING, unconfined_ok

SandboxMode = Literal["bwrap", "none"]

log = logging.getLogger(__name__)

_SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Any variable whose name contains one of these is dropped, whatever its value.
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")
# Harmless variables worth keeping for ordinary tools (locale, terminal width, language runtimes).
_PASSTHROUGH = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "COLUMNS")
_KILL_GRACE_S = 0.5
_SANDBOX_TMP = "/tmp"  # noqa: S108 - a fresh tmpfs inside the sandbox, not the host's /tmp
SANDBOX_HOME = "/tmp/home"  # noqa: S108 - HOME: fresh per command, on that tmpfs, never the workspace
_PROXY_SOCKET = "/run/massgen-proxy.sock"  # where the egress proxy's socket appears inside
_READ_CHUNK = 65536
_SYSTEM_DIRS = ("/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt", "/var", "/dev")
_NEVER_HIDDEN = frozenset(Path(p) for p in _SYSTEM_DIRS)
NONE_WARNING = (
    "sandbox: none — agents' commands run UNCONFINED: they can write anywhere this process can, "
    "reach the network and read files outside the workspace, so every command asks for approval "
    "(MASSGEN_UNCONFINED_OK=1 skips that, for development only). Use it only where the host is itself "
    "a sandbox."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """What a command did: its exit code (None when killed), capped combined output, and why it ended."""

    exit_code: int | None
    output: bytes
    dropped_bytes: int = 0
    timed_out: bool = False
    duration_s: float = 0.0
    limits_hit: tuple[str, ...] = ()  # e.g. "process limit (512) reached"
    egress_refused: tuple[str, ...] = ()  # connections the egress proxy refused

    def render(self) -> str:
        """The tool result the model sees: notes, output, a truncation marker, then the exit status.

        Limits hit and egress refused come first, so the thread's short preview shows them too.
        """
        notes = [f"[stopped: {limit}]" for limit in self.limits_hit]
        notes += [f"[egress refused: {refused}]" for refused in self.egress_refused]
        text = "".join(f"{note}\n" for note in notes) + self.output.decode("utf-8", errors="replace")
        if self.dropped_bytes:
            text += f"\n[truncated {self.dropped_bytes} bytes]"
        if self.timed_out:
            status = f"[timed out after {self.duration_s:.1f}s; process group killed]"
        else:
            status = f"[exit code {self.exit_code}]"
        return f"{text.rstrip()}\n{status}" if text.strip() else status


_EXIT_LINE = re.compile(r"\[exit code (-?\d+)\]\Z")


def rendered_exit_code(rendered: str) -> int | None:
    """The exit code `CommandResult.render` ended `rendered` with (None: timed out, or not a render)."""
    found = _EXIT_LINE.search(rendered[-40:])
    return int(found.group(1)) if found else None


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxSpec:
    """Where one command may write and read: its own workspace, plus read-only peers."""

    workspace: Path
    read_only: Sequence[Path] = ()
    hidden: Sequence[Path] = ()  # directories replaced by an empty tmpfs (other runs, home)
    network: bool = False  # egress approved: through the proxy, to `hosts` only
    hosts: Sequence[str] = ()
    timeout_s: float = 120.0
    output_limit: int = 65536
    extra_env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = DEFAULT_LIMITS


def scrubbed_env(source: Mapping[str, str], *, home: Path, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """A fresh environment: fixed PATH and HOME, a few harmless variables, never a credential."""
    env = {"PATH": _SAFE_PATH, "HOME": str(home), "TMPDIR": _SANDBOX_TMP, "LANG": "C.UTF-8"}
    # Git reads no system config, and its global config only from this fresh HOME (never the workspace).
    env |= {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(home / ".gitconfig")}
    env |= {"XDG_CONFIG_HOME": str(home / ".config"), "GIT_TERMINAL_PROMPT": "0"}
    for name in _PASSTHROUGH:
        if name in source:
            env[name] = source[name]
    for name, value in extra.items():
        if not _looks_secret(name):
            env[name] = value
    return env


def _looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(marker in upper for marker in _SECRET_MARKERS)


class Sandbox:
    """Runs commands under bubblewrap (`mode="bwrap"`) or, only when the team says so, unconfined."""

    def __init__(
        self,
        mode: SandboxMode = "bwrap",
        *,
        bwrap_path: str | None = None,
        egress: EgressRules = DEFAULT_EGRESS,
    ) -> None:
        self.mode: SandboxMode = mode
        self.egress = egress  # makes one command's egress proxy from the approved hosts
        # An explicit path is used as given; otherwise the first candidate that passes the trial run.
        self._candidates = [bwrap_path] if bwrap_path is not None else bwrap_candidates()
        self._bwrap = self._candidates[0] if self._candidates else "bwrap"
        self._chosen = False
        if mode == "none":
            log.warning(NONE_WARNING)

    @property
    def bwrap(self) -> str:
        """The bubblewrap this sandbox runs (after `check`: the one that passed the trial run)."""
        return self._bwrap

    async def check(self) -> None:
        """Raise `SandboxUnavailable` unless commands can run; the trial run happens once per bubblewrap."""
        if self.mode == "none" or self._chosen:
            return
        self._bwrap, self._chosen = await choose_bwrap(self._candidates), True

    async def run(self, command: str, spec: SandboxSpec) -> CommandResult:
        """Run `command` with bash in the workspace; kill the whole group at the time limit."""
        await self.check()
        if self.mode == "none":
            with tempfile.TemporaryDirectory(prefix="massgen-home-") as home:
                env = scrubbed_env(os.environ, home=Path(home), extra=spec.extra_env)
                argv = ["/bin/bash", "-c", command]
                return await _execute(argv, env=env, cwd=spec.workspace, spec=spec)
        env = scrubbed_env(os.environ, home=Path(SANDBOX_HOME), extra=spec.extra_env)
        bridge = _bridge_python() if spec.network else None
        if bridge is None:
            with _filter_fd() as fd:  # bubblewrap loads the filter: `--seccomp FD`
                argv = self.bwrap_argv(command, spec, env, seccomp_fd=fd)
                result = await _execute(argv, env={}, cwd=spec.workspace, spec=spec, pass_fds=(fd,))
            if spec.network:
                return replace(result, egress_refused=("no python3 on this host to bridge the egress proxy",))
            return result
        with tempfile.TemporaryDirectory(prefix="massgen-proxy-") as folder:  # mode 0700: the bot's only
            socket_path = Path(folder) / "proxy.sock"
            proxy = self.egress.proxy(tuple(spec.hosts))
            await proxy.start(socket_path)
            try:
                url = f"http://127.0.0.1:{PROXY_PORT}"
                env |= dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), url)
                env |= {"NO_PROXY": "", "no_proxy": ""}
                argv = self.bwrap_argv(command, spec, env, bridge=(bridge, socket_path))
                result = await _execute(argv, env={}, cwd=spec.workspace, spec=spec)
            finally:
                await proxy.close()
        return replace(result, egress_refused=tuple(proxy.refused)) if proxy.refused else result

    def bwrap_argv(
        self,
        command: str,
        spec: SandboxSpec,
        env: Mapping[str, str],
        *,
        bridge: tuple[str, Path] | None = None,
        seccomp_fd: int | None = None,
    ) -> list[str]:
        """The bubblewrap command line; mount order matters (later mounts cover earlier ones).

        Always its own network namespace (only loopback inside); with `bridge` (python, proxy socket)
        the proxy's socket is mounted and a relay on 127.0.0.1 starts before the command, which
        installs the seccomp filter on the command's side; otherwise bubblewrap loads it from
        `seccomp_fd` (`seccomp.py`: no unix sockets).
        """
        ws = str(spec.workspace)
        argv = [self._bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        if spec.limits.tmp_bytes > 0:
            argv += ["--size", str(spec.limits.tmp_bytes)]
        argv += ["--tmpfs", _SANDBOX_TMP, "--dir", SANDBOX_HOME]
        for folder in socket_dirs():
            argv += ["--tmpfs", folder]
        for sock in host_sockets():
            if os.path.lexists(sock):  # scanned once per process; one gone since is not mounted over
                argv += ["--ro-bind", "/dev/null", sock]
        for hidden in _hidden_dirs(spec):
            argv += ["--tmpfs", str(hidden)]
        for peer in spec.read_only:
            argv += ["--ro-bind", str(peer), str(peer)]
        argv += ["--bind", ws, ws]
        if bridge is not None:
            argv += ["--bind", str(bridge[1]), _PROXY_SOCKET]
        argv += ["--unshare-all", "--die-with-parent", "--new-session", "--chdir", ws, "--clearenv"]
        if seccomp_fd is not None and bridge is None:
            argv += ["--seccomp", str(seccomp_fd)]
        for name, value in env.items():
            argv += ["--setenv", name, value]
        argv.append("--")
        if bridge is not None:
            program = unix_socket_filter().hex()
            argv += [bridge[0], "-I", "-S", "-c", BRIDGE, _PROXY_SOCKET, str(PROXY_PORT), program]
        argv += ["/bin/bash", "-c", command]
        return argv


async def sandbox_status(mode: SandboxMode, *, bwrap_path: str | None = None) -> str | None:
    """What to say at start-up, before any run: None when commands will run confined.

    Otherwise one message: why `run_command` will refuse (bubblewrap missing, or unable to sandbox
    here), or, for `sandbox: none`, that commands run unconfined. The trial run is cached, so the
    runs that follow do not repeat it.
    """
    if mode == "none":
        return OK_WARNING if unconfined_ok() else NONE_WARNING
    try:
        await Sandbox(mode, bwrap_path=bwrap_path).check()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def _hidden_dirs(spec: SandboxSpec) -> list[Path]:
    """Home directories (keys, tokens, shell history) plus whatever the caller hides.

    Never `/` or a system directory: hiding `/usr` because the bot was started from it would
    leave commands without a shell.
    """
    candidates = [Path("/root"), Path.home(), *spec.hidden]
    seen: list[Path] = []
    for path in candidates:
        if path not in _NEVER_HIDDEN and path.is_dir() and path not in seen:
            seen.append(path)
    return seen


def _bridge_python() -> str | None:
    """A python3 outside every folder the sandbox hides (the bot's own may live in a hidden one)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if is_executable(candidate):
            return candidate
    return None


@contextlib.contextmanager
def _filter_fd() -> Iterator[int]:
    """A pipe's read end holding the seccomp program, for bubblewrap's `--seccomp FD` (read once)."""
    program = unix_socket_filter()
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: far below a pipe's buffer
        os.close(write)
        write = -1
        yield read
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


async def _execute(
    argv: list[str], *, env: Mapping[str, str], cwd: Path, spec: SandboxSpec, pass_fds: Sequence[int] = ()
) -> CommandResult:
    loop = asyncio.get_running_loop()
    started = loop.time()
    cgroup = await asyncio.to_thread(CommandCgroup.create, spec.limits)
    try:
        return await _supervise(
            argv, env=env, cwd=cwd, spec=spec, cgroup=cgroup, started=started, pass_fds=pass_fds
        )
    finally:
        if cgroup is not None:
            await asyncio.to_thread(cgroup.remove)


async def _supervise(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    spec: SandboxSpec,
    cgroup: CommandCgroup | None,
    started: float,
    pass_fds: Sequence[int] = (),
) -> CommandResult:
    loop = asyncio.get_running_loop()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,  # its own process group, so a timeout kills every descendant
        preexec_fn=preexec(spec.limits, cgroup),  # limits for the whole tree, set before exec
        pass_fds=tuple(pass_fds),
    )
    assert proc.stdout is not None
    capture = _Capture(spec.output_limit)
    reader = asyncio.ensure_future(capture.drain(proc.stdout))
    watch = LimitWatch(
        spec.workspace, spec.limits, proc, cgroup=cgroup, fork_refused=lambda: capture.fork_refused
    )
    timed_out = False
    try:
        # `asyncio.timeout`, not `wait_for`: on 3.11 `wait_for` swallows a cancellation that arrives
        # as the process exits, and a cancelled run's agent would go on working.
        async with asyncio.timeout(spec.timeout_s):
            await proc.wait()
    except TimeoutError:
        timed_out = True
        await _kill_group(proc)
    except BaseException:  # cancelled: kill at once, reap briefly, then let the cancellation go on
        _signal_group(proc, signal.SIGKILL)
        reader.cancel()
        # Reaping avoids a zombie (and asyncio's "still running" warning); a second cancel may cut it short.
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=_KILL_GRACE_S * 4)
        raise
    finally:
        watch.stop()
    # Reap background leftovers (`cmd &`) that would otherwise outlive the call.
    _signal_group(proc, signal.SIGKILL)
    # A daemonised grandchild may hold the pipe open: then the model gets what was read so far.
    try:
        async with asyncio.timeout(_KILL_GRACE_S * 4):
            await asyncio.shield(reader)
    except TimeoutError:
        reader.cancel()
    exit_code = None if timed_out else proc.returncode
    tail = bytes(capture.kept[-8192:]).decode(errors="replace")
    return CommandResult(
        exit_code=exit_code,
        output=bytes(capture.kept),
        dropped_bytes=capture.dropped,
        timed_out=timed_out,
        duration_s=loop.time() - started,
        limits_hit=limits_hit(
            spec.limits, tail, exit_code, cgroup, disk_hit=watch.disk_hit, processes_hit=watch.processes_hit
        ),
    )


class _Capture:
    """The first `limit` bytes of the output, and a count of the rest.

    The rest is still drained, so the command never blocks on a full pipe.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0
        self.fork_refused = False  # whether the output, kept or dropped, reported a refused fork
        self._edge = b""  # the end of the last chunk, so a report split across two is still seen

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_READ_CHUNK):
            if not self.fork_refused:
                self.fork_refused = fork_refused(self._edge + chunk)
                self._edge = chunk[-64:]
            room = max(self.limit - len(self.kept), 0)
            self.kept += chunk[:room]
            self.dropped += len(chunk) - min(len(chunk), room)


def _signal_group(proc: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, then SIGKILL after a short grace."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal_group(proc, sig)
        try:
            await asyncio.wait_for(proc.wait(), timeout=_KILL_GRACE_S)
            return
        except TimeoutError:
            continue
