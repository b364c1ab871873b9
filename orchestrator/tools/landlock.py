"""Landlock: the confinement left where user namespaces are blocked (Codex's Linux sandbox uses it).

Landlock needs no namespace and no privilege: a process restricts itself (and every child) before
exec. `restrict` allows writes only beneath the given folders and, from ABI 4, refuses every TCP
connect and bind; from ABI 6, abstract unix sockets and signals outside the process's own domain.
What it does not give, and why it is a fallback and not the sandbox: reads stay as the host's
(Landlock only allowlists, so hiding `~/.ssh` means listing every readable folder instead), UDP
and pathname unix sockets stay reachable (a seccomp filter must refuse them), and processes share
the host's pid namespace. It is not wired in as a sandbox mode yet: see the report of issue 16.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
# Filesystem rights that change something; the ABI that added each one.
_WRITE_RIGHTS = (
    (1 << 1, 1),  # WRITE_FILE
    (1 << 4, 1),  # REMOVE_DIR
    (1 << 5, 1),  # REMOVE_FILE
    (1 << 6, 1),  # MAKE_CHAR
    (1 << 7, 1),  # MAKE_DIR
    (1 << 8, 1),  # MAKE_REG
    (1 << 9, 1),  # MAKE_SOCK
    (1 << 10, 1),  # MAKE_FIFO
    (1 << 11, 1),  # MAKE_BLOCK
    (1 << 12, 1),  # MAKE_SYM
    (1 << 13, 2),  # REFER (rename and link across folders)
    (1 << 14, 3),  # TRUNCATE
)
_NET_TCP = (1 << 0) | (1 << 1)  # BIND_TCP, CONNECT_TCP (ABI 4)
_SCOPED = (1 << 0) | (1 << 1)  # ABSTRACT_UNIX_SOCKET, SIGNAL (ABI 6)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc = ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The Landlock ABI version of this kernel (0: none, or disabled)."""
    version = int(_libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION))
    return max(version, 0)


def restrict(writable: Sequence[str], *, deny_tcp: bool = True) -> None:
    """Restrict the calling process and its future children; raise `OSError` if Landlock is missing.

    Meant for a `preexec_fn` (it affects the process that calls it, for good).
    """
    version = abi()
    if version < 1:
        raise OSError("Landlock is not available on this kernel")
    rights = 0
    for right, since in _WRITE_RIGHTS:
        if version >= since:
            rights |= right
    attr = _RulesetAttr(handled_access_fs=rights)
    size = 8
    if version >= 4 and deny_tcp:
        attr.handled_access_net, size = _NET_TCP, 16
    if version >= 6:
        attr.scoped, size = _SCOPED, 24
    ruleset = _check(_libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0))
    try:
        for path in writable:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(allowed_access=rights, parent_fd=fd)
                _check(_libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0))
            finally:
                os.close(fd)
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        _check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0))
    finally:
        os.close(ruleset)


def _check(result: int) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(result)
