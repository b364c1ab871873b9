"""The retry policy as pure functions, and the retry loop with an injected clock."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator

import pytest

from orchestrator.errors import ProviderError
from orchestrator.llm.base import StreamItem, TextDelta, TurnEnd
from orchestrator.llm.retry import (
    RetryPolicy,
    backoff_delay,
    is_retryable_status,
    parse_retry_after,
    retry_delay,
    stream_with_retries,
    unexpected_error,
)
from tests.orchestrator.llm.helpers import drain

POLICY = RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=4.0, max_retry_after=60.0)


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(400, False), (401, False), (403, False), (404, False), (408, True), (409, True), (422, False),
     (429, True), (500, True), (502, True), (503, True), (529, True)],
)  # fmt: skip
def test_retryable_statuses(status: int, retryable: bool) -> None:
    assert is_retryable_status(status) is retryable


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "150", "retry-after": "9"}, 0.15),  # the precise header wins
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),
        ({"retry-after": "-5"}, 0.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 10.0),  # HTTP date, `now` 10 s before
        ({"retry-after": "whenever"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=1445412470.0) == expected


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("rand", [0.0, 0.5, 0.999])
def test_backoff_grows_is_jittered_and_capped(attempt: int, rand: float) -> None:
    cap = min(POLICY.max_delay, POLICY.base_delay * 2 ** (attempt - 1))
    delay = backoff_delay(attempt, POLICY, rand)
    assert cap / 2 <= delay <= cap
    assert delay == pytest.approx(cap / 2 * (1 + rand))


def error(status: int | None, retryable: bool, retry_after: float | None = None) -> ProviderError:
    return ProviderError("p", "m", status, retryable, "boom", retry_after=retry_after)


@pytest.mark.parametrize(
    ("err", "attempt", "expected"),
    [
        (error(500, True), 1, 0.25),
        (error(500, True), 3, 1.0),
        (error(500, True), 4, None),  # attempts used up
        (error(400, False), 1, None),
        (error(429, True, retry_after=7.5), 1, 7.5),  # honoured exactly, no jitter below it
        (error(429, True, retry_after=61.0), 1, None),  # beyond the ceiling: fail now
    ],
)
def test_retry_delay(err: ProviderError, attempt: int, expected: float | None) -> None:
    assert retry_delay(err, attempt, POLICY, rand=0.0) == expected


@pytest.mark.parametrize(("retry_after", "spread"), [(0.0, 0.0), (2.0, 0.2), (30.0, 1.0)])
def test_retry_after_is_spread_but_never_shortened(retry_after: float, spread: float) -> None:
    err = error(429, True, retry_after=retry_after)
    assert retry_delay(err, 1, POLICY, rand=0.0) == retry_after
    assert retry_delay(err, 1, POLICY, rand=0.999) == pytest.approx(retry_after + spread * 0.999)


def test_invalid_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="invalid retry policy"):
        RetryPolicy(max_attempts=0)


@pytest.mark.parametrize(
    ("exc", "retryable", "words"),
    [
        (TimeoutError("slow"), True, "timed out"),
        (ConnectionResetError("gone"), True, "connection failed"),
        (KeyError("bug"), False, "unexpected KeyError"),
        (json.JSONDecodeError("Expecting value", "<html>", 0), True, "malformed response: data is not JSON"),
    ],
)
def test_unexpected_errors(exc: Exception, retryable: bool, words: str) -> None:
    classified = unexpected_error(exc, "p", "m")
    assert (classified.status, classified.retryable) == (None, retryable)
    assert words in classified.message


class Attempts:
    """Each attempt fails with the next scripted error before or after its first item."""

    def __init__(self, failures: list[tuple[Exception, bool] | None]) -> None:
        self.failures = failures
        self.opened = self.closed = 0

    async def attempt(self) -> AsyncGenerator[StreamItem, None]:
        failure = self.failures[self.opened]
        self.opened += 1
        try:
            if failure is not None and not failure[1]:
                raise failure[0]
            yield TextDelta(text="a")
            if failure is not None:
                raise failure[0]
            yield TurnEnd(stop_reason="end_turn")
        finally:
            self.closed += 1


def classify(exc: Exception) -> ProviderError:
    return error(503, True) if isinstance(exc, OSError) else error(None, False)


async def run(attempts: Attempts, policy: RetryPolicy = POLICY) -> tuple[list[StreamItem], list[float]]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    stream = stream_with_retries(attempts.attempt, classify, policy, sleep=sleep, rand=lambda: 0.0)
    items = [item async for item in stream]
    return items, waits


async def test_retries_before_first_item_with_backoff() -> None:
    attempts = Attempts([(OSError("x"), False), (OSError("y"), False), None])
    items, waits = await run(attempts)
    assert items == [TextDelta(text="a"), TurnEnd(stop_reason="end_turn")]
    assert waits == [0.25, 0.5]
    assert attempts.opened == attempts.closed == 3


async def test_no_retry_after_the_first_item() -> None:
    attempts = Attempts([(OSError("late"), True), None])
    seen: list[StreamItem] = []
    with pytest.raises(ProviderError) as info:
        await drain(stream_with_retries(attempts.attempt, classify, POLICY), seen)
    assert seen == [TextDelta(text="a")]
    assert info.value.status == 503
    assert isinstance(info.value.__cause__, OSError)
    assert attempts.opened == attempts.closed == 1


async def test_exhausted_and_non_retryable_errors_raise_at_once() -> None:
    attempts = Attempts([(OSError("x"), False)] * 2)
    with pytest.raises(ProviderError, match="503") as exhausted:
        await run(attempts, RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=0.0))
    assert exhausted.value.message == "boom (after 2 attempts)"  # the drop reason says it was retried
    assert (exhausted.value.status, exhausted.value.retryable) == (503, True)
    assert attempts.opened == attempts.closed == 2
    attempts = Attempts([(KeyError("bug"), False), None])
    with pytest.raises(ProviderError) as info:
        await run(attempts)
    assert info.value.retryable is False
    assert "attempts" not in info.value.message
    assert attempts.opened == 1


async def test_early_close_closes_the_attempt() -> None:
    attempts = Attempts([None])
    stream = stream_with_retries(attempts.attempt, classify, POLICY)
    assert await anext(stream) == TextDelta(text="a")
    await stream.aclose()  # type: ignore[attr-defined]
    assert attempts.closed == 1


async def test_no_attempt_starts_past_the_call_deadline() -> None:
    attempts = Attempts([(OSError("x"), False)] * 4)
    left = iter([10.0, 0.3])  # seconds left of the call's deadline at each failure
    with pytest.raises(ProviderError) as info:
        await drain(
            stream_with_retries(
                attempts.attempt,
                classify,
                POLICY,
                sleep=_no_wait,
                rand=lambda: 0.0,
                remaining=lambda: next(left),
            ),
            [],
        )
    assert attempts.opened == attempts.closed == 2  # the second backoff (0.5 s) would end past it
    assert info.value.message == "boom (after 2 attempts)"


async def _no_wait(_: float) -> None:
    return None


async def test_each_attempt_is_admitted_and_the_backoff_holds_no_slot() -> None:
    log: list[str] = []
    attempts = Attempts([(OSError("x"), False), None])

    @contextlib.asynccontextmanager
    async def admit() -> AsyncIterator[None]:
        log.append("admitted")
        try:
            yield
        finally:
            log.append(f"released after {attempts.opened} opened, {attempts.closed} closed")

    async def sleep(seconds: float) -> None:
        log.append("backoff")

    stream = stream_with_retries(
        attempts.attempt, classify, POLICY, sleep=sleep, rand=lambda: 0.0, admit=admit
    )
    assert [item async for item in stream][-1] == TurnEnd(stop_reason="end_turn")
    assert log == [
        "admitted",
        "released after 1 opened, 1 closed",  # the failed attempt's response is closed first
        "backoff",
        "admitted",
        "released after 2 opened, 2 closed",
    ]
