"""The engine's shape: no import cycle anywhere in `approvals`, hidden in a function or not.

A module-level cycle works only while the import order happens to suit it; a function-local
import that exists to dodge one is the same cycle, paid for at every call. Both count here: every
import that runs (those under `if TYPE_CHECKING:` never do) is an edge. The direction between the
engine's sub-rooms is import-linter's (`layers` contracts in pyproject.toml).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module under `root/package`, by dotted name (a package is its `__init__.py`)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_only(tree: ast.Module) -> set[int]:
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }


def _imported(tree: ast.Module, known: dict[str, Path]) -> Iterator[str]:
    """The modules of `known` that `tree` imports at run time (`from pkg import mod` names `pkg.mod`)."""
    skip = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in known:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield full if full in known else node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)


def graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports at run time."""
    known = modules(root, package)
    return {name: set(_imported(ast.parse(path.read_text()), known)) - {name} for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (iterative Tarjan: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = stack[stack.index(node) :]
                    del stack[stack.index(node) :]
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return found


def test_approvals_has_no_import_cycle() -> None:
    assert cycles(graph(REPO, "approvals")) == []


def test_a_cycle_through_a_function_local_import_is_found(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    (room / "__init__.py").write_text("")
    (room / "floor.py").write_text("from room.code import read\n")
    (room / "code.py").write_text("def read():\n    from room import floor  # dodges the cycle\n")
    (room / "types.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from room.floor import read\n"
    )
    (room / "plain.py").write_text("import room.code\n")
    assert cycles(graph(tmp_path, "room")) == [["room.code", "room.floor"]]
