"""Front doors that load their heavy adapters on first use (PEP 562).

A door names such exports in a `{name: module}` table and sets `__getattr__ = lazy_exports(__name__,
table)`; the names stay importable and typed (under `TYPE_CHECKING`), and the module behind one is
imported only when the name is first read. Here, in the lowest package, so every door can use it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: each name of `where` imported from its module, then kept."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # read from the module from now on, without this function
        return value

    return __getattr__
