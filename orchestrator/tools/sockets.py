"""Host unix sockets kept out of the sandbox's mount tree.

A unix socket is a file, so it crosses network namespaces: a plain `docker ps` reaches the host's
`/run/docker.sock` from a sandbox with no network. And connecting to a socket is allowed on a
read-only mount. So the folders where sockets live are replaced by an empty tmpfs, and the sockets
found elsewhere in what commands see are covered with `/dev/null` one by one. Abstract sockets
belong to the network namespace, which every command has its own of.
"""

from __future__ import annotations

import os
import stat

_SOCKET_DIRS = ("/run", "/var/run", "/var/tmp", "/dev/shm")  # noqa: S108 - hidden, not used
_SOCKET_SCAN = ("/var", "/etc", "/opt", "/srv", "/mnt", "/media", "/home", "/usr/local")
_SKIP = frozenset({*_SOCKET_DIRS, "/var/lib/docker", "/var/lib/containerd"})
_SOCKET_SCAN_DEPTH = 5
_SOCKET_SCAN_ENTRIES = 50_000


def socket_dirs() -> list[str]:
    """Host folders of sockets hidden behind a tmpfs (a symlink such as /var/run -> /run is skipped)."""
    return [d for d in _SOCKET_DIRS if os.path.isdir(d) and not os.path.islink(d)]


_SOCKETS: list[str] | None = None


def host_sockets() -> list[str]:
    """Unix sockets in the host folders commands see (scanned once per process, bounded)."""
    global _SOCKETS
    if _SOCKETS is None:
        _SOCKETS = []
        budget = [_SOCKET_SCAN_ENTRIES]
        for top in _SOCKET_SCAN:
            if os.path.isdir(top) and not os.path.islink(top):
                _scan(top, _SOCKET_SCAN_DEPTH, budget, _SOCKETS)
    return _SOCKETS


def _scan(folder: str, depth: int, budget: list[int], found: list[str]) -> None:
    if folder in _SKIP:
        return
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        budget[0] -= 1
        if budget[0] < 0:
            return
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode):
            found.append(entry.path)
        elif stat.S_ISDIR(mode) and depth > 0:
            _scan(entry.path, depth - 1, budget, found)
