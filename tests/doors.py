"""The check every package's front-door test makes: `__all__` is sorted and exactly the pinned API."""

from __future__ import annotations

import importlib


def door_order(name: str) -> tuple[bool, str]:
    """The house's `__all__` order: ALL_CAPS constants first, then the rest alphabetically."""
    return (not name.isupper(), name)


def assert_door(module: str, expected: list[str]) -> None:
    """`module.__all__` equals `expected`, is in door order, and every name resolves."""
    door = importlib.import_module(module)
    assert door.__all__ == expected
    assert door.__all__ == sorted(door.__all__, key=door_order)
    for name in door.__all__:
        assert getattr(door, name) is not None
