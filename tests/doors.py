"""The check every front door gets: `__all__` is sorted and exactly what the door itself binds.

Derived from the module, not copied from it: the public names are those the `__init__.py` binds
at the top (imports from its own package, definitions, assignments; the lazy names declared under
`if TYPE_CHECKING:` included). A name imported but not exported, or exported but never bound,
fails; so does an `__all__` out of order or a name that does not resolve.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

ROOTS = ("approvals", "orchestrator", "bot")
REPO = Path(__file__).resolve().parent.parent


def door_order(name: str) -> tuple[bool, str]:
    """The house's `__all__` order: ALL_CAPS constants first, then the rest alphabetically."""
    return (not name.isupper(), name)


def doors() -> list[str]:
    """Every package under the three roots that has a door (`bot` itself is imported by nobody)."""
    found = []
    for root in ROOTS:
        for init in sorted((REPO / root).rglob("__init__.py")):
            name = ".".join(init.parent.relative_to(REPO).parts)
            if name != "bot":
                found.append(name)
    return found


def declared(module: ModuleType) -> list[str]:
    """The public names `module`'s own top-level statements bind, sorted in door order."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    package = module.__name__.split(".")[0]
    names: set[str] = set()
    _bind(tree.body, package, names)
    return sorted((n for n in names if not n.startswith("_")), key=door_order)


def _bind(body: list[ast.stmt], package: str, names: set[str]) -> None:
    for node in body:
        match node:
            case ast.If(test=ast.Name(id="TYPE_CHECKING")):
                _bind(node.body, package, names)  # the lazy names, declared for the type checker
            case ast.ImportFrom(level=0, module=str(source)) if source.split(".")[0] != package:
                continue  # the door's own tools (typing, importlib...), not its API
            case ast.ImportFrom():
                names.update(alias.asname or alias.name for alias in node.names)
            case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.ClassDef():
                names.add(node.name)
            case ast.Assign(value=ast.Call(func=ast.Attribute(attr="getLogger"))):
                continue  # the module's logger
            case ast.Assign():
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            case ast.AnnAssign(target=ast.Name(id=name)):
                names.add(name)


def assert_door(module: str) -> None:
    """`module.__all__` is in door order, equals what the door binds, and every name resolves."""
    door = importlib.import_module(module)
    exported = list(door.__all__)
    assert exported == sorted(exported, key=door_order), f"{module}.__all__ is not in door order"
    assert exported == declared(door), f"{module}.__all__ is not what the door binds"
    for name in exported:
        assert getattr(door, name) is not None
