"""A per-decision time budget, checked cooperatively by the engine's loops (it fails closed).

The engine sets a deadline for the judgment in progress (a context variable, so concurrent
judgments in threads or tasks each have their own); the parser, the expander and the engine call
`check_deadline()` as they go, and a judgment past its deadline stops with `JudgmentTimeout`,
which the engine turns into a deny.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

Clock = Callable[[], float]


class JudgmentTimeout(Exception):
    """The judgment ran past its deadline."""


_DEADLINE: contextvars.ContextVar[tuple[Clock, float] | None] = contextvars.ContextVar(
    "permission_deadline", default=None
)


@contextlib.contextmanager
def deadline(clock: Clock, seconds: float) -> Iterator[None]:
    """Run the body with a deadline `seconds` from now on `clock`."""
    token = _DEADLINE.set((clock, clock() + seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_deadline() -> None:
    """Raise `JudgmentTimeout` when the current judgment is past its deadline (no-op outside one)."""
    current = _DEADLINE.get()
    if current is not None and current[0]() > current[1]:
        raise JudgmentTimeout
