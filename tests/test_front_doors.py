"""Every package's front door: a sorted `__all__` that is exactly the names the door binds."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.doors import assert_door, declared, doors


@pytest.mark.parametrize("module", doors())
def test_the_front_door_exports_exactly_what_it_binds(module: str) -> None:
    assert_door(module)


def test_every_room_has_a_door() -> None:
    # A new room without an `__init__.py` would silently escape the check above.
    assert {
        "approvals",
        "approvals.permissions",
        "approvals.permissions.boundaries",
        "approvals.permissions.commands",
        "approvals.permissions.floor",
        "approvals.permissions.model",
        "approvals.permissions.policy",
        "approvals.permissions.risk",
        "orchestrator.run",
        "orchestrator.tools",
        "bot.runs",
    } <= set(doors())


def test_a_name_bound_but_not_exported_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "__init__.py"
    path.write_text(
        "from approvals.models import Ask, Principal\nfrom typing import Any\n__all__ = ['Ask']\n"
    )
    door = ModuleType("approvals.fake")
    door.__file__ = str(path)
    assert declared(door) == ["Ask", "Principal"]  # `Any` is the door's tool, `Principal` its API
