"""Paths in a patch that make code run later (git config, hooks, CI, build and package scripts).

An approver of a patch (apply-back or a pull request) sees every such path named on the request:
these are the files where a change is a change to what runs, not to what is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

_NAMES = frozenset(
    {
        ".gitconfig", ".gitmodules", ".gitattributes", ".envrc", "Makefile", "GNUmakefile", "makefile",
        "package.json", "pyproject.toml", "setup.py", "setup.cfg", ".pre-commit-config.yaml",
        ".gitlab-ci.yml", "Justfile", "justfile", "Rakefile", "build.gradle", "Taskfile.yml", ".npmrc",
        "conftest.py", "tox.ini", "noxfile.py", "Dockerfile", ".bashrc", ".profile", ".zshrc",
    }
)  # fmt: skip
_DIRS = frozenset({".git", "hooks", ".husky", ".githooks", ".devcontainer", ".circleci", ".vscode"})
_PREFIXES = (".github/workflows/", ".github/actions/")


def sensitive_paths(paths: Iterable[str]) -> tuple[str, ...]:
    """The paths (in order, each once) whose change changes what runs."""
    found: list[str] = []
    for path in paths:
        parts = PurePosixPath(path).parts
        if not parts:
            continue
        hit = (
            parts[-1] in _NAMES
            or any(part in _DIRS for part in parts[:-1])
            or path.startswith(_PREFIXES)
            or parts[-1].endswith((".gitconfig", ".mk"))
        )
        if hit and path not in found:
            found.append(path)
    return tuple(found)


def diff_stat(patch: str) -> tuple[int, int, int]:
    """(files, insertions, deletions) of a unified diff, counted in one pass."""
    files = insertions = deletions = 0
    in_hunk = False
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            files += 1
            in_hunk = False
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            insertions += 1
        elif in_hunk and line.startswith("-"):
            deletions += 1
    return files, insertions, deletions


def stat_text(patch: str) -> str:
    """`git diff --stat`'s summary line for a patch."""
    files, plus, minus = diff_stat(patch)
    text = f"{files} file{'s' if files != 1 else ''} changed"
    if plus:
        text += f", {plus} insertion{'s' if plus != 1 else ''}(+)"
    if minus:
        text += f", {minus} deletion{'s' if minus != 1 else ''}(-)"
    return text
