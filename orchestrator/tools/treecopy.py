"""Copying, walking and pruning file trees: shared by the run's workspaces and their ready copies."""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

_SKIP_DIRS = frozenset({".git"})  # repository internals are not part of the patch


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


def file_stats(top: Path) -> dict[str, os.stat_result]:
    """(relative POSIX path -> lstat) of every file and symlink under `top`; `.git` is skipped."""
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


def same_stat(a: os.stat_result, b: os.stat_result) -> bool:
    """Same kind and permission bits, size and mtime: a copy `cp -a` made and nobody wrote since."""
    return (a.st_mode, a.st_size, a.st_mtime_ns) == (b.st_mode, b.st_size, b.st_mtime_ns)
