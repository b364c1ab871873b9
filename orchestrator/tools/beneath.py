"""Opening a pinned path without leaving its root: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`.

The file tools judge a real path (symlinks resolved) and then open exactly it. Between the two, an
agent's command may swap a component for a symlink or a `..` trick; the kernel's `openat2` refuses
to resolve outside the root directory, through any symlink or through `/proc` magic links, in one
system call, so there is no check-then-use gap. Where `openat2` is missing (Linux < 5.6, seccomp
profiles that return ENOSYS), the path is opened one component at a time with `O_NOFOLLOW`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Sequence

_SYS_OPENAT2 = 437  # the same number on every Linux architecture (added in 5.6)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS | _RESOLVE_NO_SYMLINKS
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH_FLAGS = getattr(os, "O_PATH", 0) | os.O_DIRECTORY | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - no C library to call through
    _libc = None
_available: bool | None = None  # None: not tried yet


def openat2(dir_fd: int, path: str, flags: int, mode: int = 0) -> int:
    """`openat2` with the beneath-only resolution; raise `OSError` (ENOSYS where the kernel lacks it)."""
    if _libc is None:
        raise OSError(errno.ENOSYS, "openat2 is not available")
    how = _OpenHow(flags=flags | os.O_CLOEXEC, mode=mode if flags & os.O_CREAT else 0, resolve=_RESOLVE)
    fd = int(_libc.syscall(_SYS_OPENAT2, dir_fd, path.encode(), ctypes.byref(how), ctypes.sizeof(how)))
    if fd < 0:
        code = ctypes.get_errno()
        if code == errno.EXDEV:
            raise PermissionError(code, f"refused: {path} leads outside {_name(dir_fd)}")
        if code == errno.ELOOP:
            raise PermissionError(code, f"refused: {path} goes through a symlink")
        raise OSError(code, os.strerror(code), path)
    return fd


def has_openat2() -> bool:
    """Whether this kernel (and seccomp profile) offers `openat2` (probed once)."""
    global _available
    if _available is None:
        root = os.open("/", _PATH_FLAGS)
        try:
            os.close(openat2(root, ".", _PATH_FLAGS))
            _available = True
        except OSError:
            _available = False
        finally:
            os.close(root)
    return _available


def _name(dir_fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{dir_fd}")
    except OSError:
        return "its root"


def root_of(real: str, roots: Sequence[str]) -> str:
    """The deepest of `roots` that holds `real` ("/" when none does: a read approved elsewhere)."""
    best = "/"
    for root in roots:
        top = os.path.realpath(root)
        if (real == top or real.startswith(top.rstrip("/") + "/")) and len(top) > len(best):
            best = top
    return best


def open_real(real: str, flags: int, *, roots: Sequence[str] = (), create_dirs: bool = False) -> int:
    """Open the absolute, symlink-free `real` beneath its root, refusing any symlink met on the way."""
    root = root_of(real, roots)
    rel = os.path.relpath(real, root)
    if not has_openat2():
        return _open_components(real, flags, create_dirs=create_dirs)
    root_fd = os.open(root, _PATH_FLAGS)
    try:
        if create_dirs:
            parts = rel.split("/")[:-1]
            for depth, part in enumerate(parts):
                parent = openat2(root_fd, "/".join(parts[:depth]) or ".", _PATH_FLAGS)
                try:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=parent)
                finally:
                    os.close(parent)
        return openat2(root_fd, rel, flags, 0o644)
    finally:
        os.close(root_fd)


def _open_components(real: str, flags: int, *, create_dirs: bool = False) -> int:
    """The fallback: one component at a time from `/`, each with `O_NOFOLLOW`."""
    try:
        return _walk_components(real, flags, create_dirs=create_dirs)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PermissionError(exc.errno, f"refused: {real} goes through a symlink") from None
        raise


def _walk_components(real: str, flags: int, *, create_dirs: bool) -> int:
    parts = [p for p in real.split("/") if p]
    fd = os.open("/", _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            if create_dirs:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        if not parts:
            return os.dup(fd)
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
    finally:
        os.close(fd)
