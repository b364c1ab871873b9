"""The seccomp filter every sandboxed command runs under: no unix socket can be opened at all.

A unix socket is a file, so it crosses network namespaces: the host's `/run/docker.sock`, a
database's or the bot's own socket is reachable from a command with no network unless the mount
tree hides it. Hiding (`sockets.py`) covers the folders and the sockets a scan finds; a socket made
after the scan, or in a folder it does not read, would still be reachable. So, as Claude Code's
sandbox runtime does on Linux, a command cannot create an `AF_UNIX` socket: `socket(AF_UNIX, ...)`
fails with EPERM whatever the path it would connect to. `socketpair` (pipes between a program's
own processes, which asyncio and multiprocessing use) is not affected. io_uring, which can open and
connect sockets without the `socket` system call, is refused as well, and a process of another
architecture (a 32-bit binary, x32 system calls) is killed, so no second system call table
bypasses the rule.

The program is classic BPF, built here (no libseccomp): bubblewrap loads it with `--seccomp FD`;
where a relay must reach the egress proxy's own socket inside the sandbox, the relay installs it
on the command's side just before executing it (`BRIDGE` in `proxy.py`).
"""

from __future__ import annotations

import functools
import platform
import struct

from orchestrator.errors import SandboxUnavailable

# struct seccomp_data: nr (u32) at 0, arch (u32) at 4, instruction pointer at 8, args[6] (u64) from 16.
_NR, _ARCH, _ARG0 = 0, 4, 16
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
_ALLOW, _KILL_PROCESS = 0x7FFF0000, 0x80000000
_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_AF_UNIX = 1
_X32_BIT = 0x40000000
_IO_URING = (425, 426, 427)  # io_uring_setup, _enter, _register: one numbering on every architecture
# machine -> (AUDIT_ARCH_*, __NR_socket, whether x32 system calls exist)
_ARCHES = {
    "x86_64": (0xC000003E, 41, True),
    "aarch64": (0xC00000B7, 198, False),
}


class SeccompUnsupported(SandboxUnavailable):
    """This machine's architecture has no filter here: commands are refused, never run without it."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


@functools.cache
def unix_socket_filter(machine: str | None = None) -> bytes:
    """The compiled program (struct sock_filter[]) for `machine` (default: this one).

    Layout, with jumps counted from the next instruction:
    `ld arch; jeq ARCH else kill; ld nr; <checks: jump to deny, or to the socket check>; ret allow;
    socket: ld args[0]; jeq AF_UNIX deny else allow; allow: ret allow; deny: ret EPERM; kill`.
    """
    name = machine or platform.machine()
    if name not in _ARCHES:
        raise SeccompUnsupported(f"no seccomp filter for {name} (known: {', '.join(_ARCHES)})")
    arch, socket_nr, x32 = _ARCHES[name]
    checks: list[tuple[int, int, str]] = [(_JGE, _X32_BIT, "deny")] if x32 else []
    checks.append((_JEQ, socket_nr, "socket"))
    checks += [(_JEQ, nr, "deny") for nr in _IO_URING]
    first = 3  # the first check's index
    socket_at = first + len(checks) + 1
    allow_at, deny_at, kill_at = socket_at + 2, socket_at + 3, socket_at + 4
    program = [_ins(_LD_ABS, _ARCH), _ins(_JEQ, arch, 0, kill_at - 2), _ins(_LD_ABS, _NR)]
    for i, (code, k, target) in enumerate(checks):
        goal = socket_at if target == "socket" else deny_at
        program.append(_ins(code, k, goal - (first + i) - 1, 0))
    program.append(_ins(_RET, _ALLOW))  # no check matched
    program.append(_ins(_LD_ABS, _ARG0))  # socket(domain, ...): the kernel reads the domain as an int
    program.append(_ins(_JEQ, _AF_UNIX, deny_at - socket_at - 2, allow_at - socket_at - 2))
    program += [_ins(_RET, _ALLOW), _ins(_RET, _EPERM), _ins(_RET, _KILL_PROCESS)]
    return b"".join(program)


__all__ = ["SeccompUnsupported", "unix_socket_filter"]
