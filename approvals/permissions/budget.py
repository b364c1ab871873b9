"""A per-decision time budget, checked cooperatively by the engine's loops (it fails closed).

The engine sets a deadline for the judgment in progress (a context variable, so concurrent
judgments in threads or tasks each have their own); the parser, the expander and the engine call
`check_deadline()` as they go, and a judgment past its deadline stops with `JudgmentTimeout`,
which the engine turns into a deny.

Time is not the only bound: every expansion or product loop (brace expansion, loop bodies ×
values, nested `-c` text…) also spends WORK steps through `spend()`, so an input whose judgment
would grow exponentially stops early and deterministically with `TooComplex`, whatever the
machine's speed. A truncated expansion is never judged partially: `TooComplex` is a deny.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

Clock = Callable[[], float]


class JudgmentTimeout(Exception):
    """The judgment ran past its deadline."""


class TooComplex(Exception):
    """The text exceeds a structural cap or a work budget (its message says which); fails closed."""


# Work steps one judgment may spend in its expansion and product loops; callers weigh a step at
# about a microsecond of work (four characters scanned, one path judged in one place is 50).
MAX_WORK = 25_000
_WORK: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("permission_work", default=None)


_DEADLINE: contextvars.ContextVar[tuple[Clock, float] | None] = contextvars.ContextVar(
    "permission_deadline", default=None
)


@contextlib.contextmanager
def deadline(clock: Clock, seconds: float) -> Iterator[None]:
    """Run the body with a deadline `seconds` from now on `clock`."""
    token = _DEADLINE.set((clock, clock() + seconds))
    work = _WORK.set([0])
    try:
        yield
    finally:
        _WORK.reset(work)
        _DEADLINE.reset(token)


def check_deadline() -> None:
    """Raise `JudgmentTimeout` when the current judgment is past its deadline (no-op outside one)."""
    current = _DEADLINE.get()
    if current is not None and current[0]() > current[1]:
        raise JudgmentTimeout


def spend(steps: int, what: str) -> None:
    """Count `steps` of work on `what`; past the judgment's budget raise `TooComplex` (deadline too)."""
    counter = _WORK.get()
    if counter is None:
        return
    counter[0] += steps
    if counter[0] > MAX_WORK:
        raise TooComplex(f"{what} needs more than {MAX_WORK} steps of work")
    check_deadline()


def work_spent() -> int:
    """The work steps spent so far by the current judgment (0 outside one): for tests and the bench."""
    counter = _WORK.get()
    return 0 if counter is None else counter[0]
