"""Retries for streamed model turns: backoff with jitter, `Retry-After`, never after output began.

The SDK clients are built with `max_retries=0`; this module is the only place that retries, so a
call is never retried twice over. A turn is retried only until its first item reaches the caller:
after that the caller has seen partial output and a replay would duplicate it, so a failure
surfaces as `ProviderError` and the coordination layer decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from orchestrator.errors import ProviderError
from orchestrator.llm.base import StreamItem

# 408 timeout, 409 lock conflict, 429 rate limit: transient despite being 4xx (same set as the SDKs).
_RETRYABLE_4XX = frozenset({408, 409, 429})


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long to wait. Delays in seconds."""

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 8.0
    # A provider asking for a longer pause than this is not waited for: fail now, let the caller decide.
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_delay < 0 or self.max_delay < self.base_delay:
            raise ValueError(f"invalid retry policy: {self}")


def is_retryable_status(status: int) -> bool:
    """5xx and 408/409/429 are transient; other 4xx are the request's fault."""
    return status >= 500 or status in _RETRYABLE_4XX


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, else `retry-after` (seconds or HTTP date); None if absent."""
    lowered = {k.lower(): v for k, v in headers.items()}
    with contextlib.suppress(ValueError):
        return max(0.0, float(lowered.get("retry-after-ms", "")) / 1000)
    value = lowered.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, float(email.utils.mktime_tz(parsed)) - (time.time() if now is None else now))


def backoff_delay(attempt: int, policy: RetryPolicy, rand: float) -> float:
    """Equal-jitter exponential backoff for retry number `attempt` (1-based); `rand` in [0, 1)."""
    cap = min(policy.max_delay, policy.base_delay * 2.0 ** (attempt - 1))
    return cap / 2 + cap / 2 * rand


def retry_delay(error: ProviderError, attempt: int, policy: RetryPolicy, rand: float) -> float | None:
    """Seconds to wait before the next attempt, or None when the error must be raised."""
    if not error.retryable or attempt >= policy.max_attempts:
        return None
    if error.retry_after is not None:
        if error.retry_after > policy.max_retry_after:
            return None
        # Never earlier than asked; spread a little so agents limited together do not return together.
        return error.retry_after + rand * min(1.0, 0.1 * error.retry_after)
    return backoff_delay(attempt, policy, rand)


async def stream_with_retries(
    open_attempt: Callable[[], AsyncGenerator[StreamItem, None]],
    classify: Callable[[Exception], ProviderError],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rand: Callable[[], float] = random.random,
    remaining: Callable[[], float] | None = None,
    record: Callable[[str, int | None], None] | None = None,
    admit: Callable[[], AbstractAsyncContextManager[None]] | None = None,
) -> AsyncIterator[StreamItem]:
    """Yield one attempt's items, opening a new attempt on retryable failures before the first item.

    `record(outcome, status)` counts each attempt (`ok`, `retried`, `error`) for the metrics.

    `remaining` gives the seconds left of the call's own deadline: no attempt is started that
    would begin after it (the call's failure is then final). Each attempt generator is closed
    (`aclose`) however this generator ends, so cancellation or an early `aclose()` by the caller
    closes the HTTP response.

    `admit()` is entered around each attempt (the provider's rate and concurrency limits): a
    retry is a new request and is admitted again; the back-off between attempts holds no slot.
    """
    count = record or _ignore
    attempt = 0
    while True:
        attempt += 1
        delay = 0.0
        async with (admit or contextlib.nullcontext)():
            stream = open_attempt()
            try:
                try:
                    first = await anext(stream)
                except StopAsyncIteration:
                    count("ok", None)
                    return
                except Exception as exc:
                    delay = _retry_or_raise(exc, classify, attempt, policy, rand(), remaining, count)
                else:
                    count("ok", None)
                    yield first
                    try:
                        async for item in _classified(stream, classify):
                            yield item
                    except ProviderError as late:  # the stream broke after output began: the turn failed
                        count("error", late.status)
                        raise
                    return
            finally:
                await stream.aclose()
        await sleep(delay)


def _retry_or_raise(
    exc: Exception,
    classify: Callable[[Exception], ProviderError],
    attempt: int,
    policy: RetryPolicy,
    rand: float,
    remaining: Callable[[], float] | None,
    count: Callable[[str, int | None], None],
) -> float:
    """The delay before the next attempt after `exc` ended this one before any output; else raise."""
    error = exc if isinstance(exc, ProviderError) else classify(exc)
    delay = retry_delay(error, attempt, policy, rand)
    if delay is not None and remaining is not None and delay >= remaining():
        delay = None  # the next attempt would start past the call's deadline
    count("error" if delay is None else "retried", error.status)
    if delay is None:
        error = _after(error, attempt)
        if error is exc:
            raise exc
        raise error from exc
    return delay


def _ignore(_outcome: str, _status: int | None) -> None:
    return None


def _after(error: ProviderError, attempts: int) -> ProviderError:
    """The error that ends a turn, saying how many attempts it took when there were several."""
    if attempts == 1:
        return error
    message = f"{error.message} (after {attempts} attempts)"
    return ProviderError(
        error.provider, error.model, error.status, error.retryable, message, retry_after=error.retry_after
    )


async def _classified(
    stream: AsyncIterator[StreamItem], classify: Callable[[Exception], ProviderError]
) -> AsyncIterator[StreamItem]:
    """Pass items through; any failure after the first item becomes a `ProviderError`, unretried."""
    while True:
        try:
            item = await anext(stream)
        except StopAsyncIteration:
            return
        except ProviderError:
            raise
        except Exception as exc:
            raise classify(exc) from exc
        yield item


@dataclass(frozen=True, slots=True)
class SdkErrors:
    """One SDK's API error classes; both vendors' SDKs share this hierarchy (generated by Stainless)."""

    status: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]
    # A 200 whose data does not fit the SDK's models (raised in strict validation mode).
    validation: type[Exception] | None = None


def classify_sdk_error(exc: Exception, errors: SdkErrors, provider: str, model: str) -> ProviderError:
    """Turn an SDK exception into a `ProviderError` with status, retryability and Retry-After."""
    if isinstance(exc, errors.status):
        status: int = getattr(exc, "status_code", 0)
        retry_after = parse_retry_after(getattr(exc, "response").headers)  # noqa: B009 - typed as Exception
        message = getattr(exc, "message", str(exc))
        return ProviderError(
            provider, model, status, is_retryable_status(status), message, retry_after=retry_after
        )
    if isinstance(exc, errors.timeout):
        return ProviderError(provider, model, None, True, "request timed out")
    if isinstance(exc, errors.connection):
        detail = getattr(exc, "message", exc)
        return ProviderError(provider, model, None, True, f"connection failed{_to_url(exc)}: {detail}")
    if errors.validation is not None and isinstance(exc, errors.validation):
        return malformed_response(provider, model, getattr(exc, "message", str(exc)))
    return unexpected_error(exc, provider, model)


def malformed_response(provider: str, model: str, detail: str) -> ProviderError:
    """A 200 whose body is not JSON or not the API's shape: a broken server or proxy, so retryable."""
    return ProviderError(provider, model, None, True, f"malformed response: {detail}")


def unexpected_error(exc: Exception, provider: str, model: str) -> ProviderError:
    """Classify an exception that is not one of the SDK's API errors.

    The Anthropic SDK lets transport errors from its HTTP stack (`httpx2`) escape a stream unwrapped;
    they are recognised by name so this module needs no import of that undeclared dependency. Event
    data that is not JSON (the SDKs' `json.loads`) is a malformed response, retryable.
    Anything else is a bug, reported as not retryable so it is not hidden behind retries.
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "JSONDecodeError" in names:  # the SDK parsing an event's data (`sse.json()`)
        return malformed_response(provider, model, f"data is not JSON ({exc})")
    if names & {"TimeoutException", "TimeoutError"}:
        return ProviderError(provider, model, None, True, f"timed out: {exc!r}")
    if names & {"TransportError", "ConnectionError"}:
        return ProviderError(provider, model, None, True, f"connection failed{_to_url(exc)}: {exc!r}")
    return ProviderError(provider, model, None, False, f"unexpected {type(exc).__name__}: {exc}")


def _to_url(exc: Exception) -> str:
    """` to <url>` for an error that carries the HTTP request it was making (the SDKs' and httpx's do)."""
    try:
        url = getattr(exc, "request", None).url  # type: ignore[union-attr]
    except (AttributeError, RuntimeError):  # no request, or httpx's "request not set"
        return ""
    return f" to {url}" if url else ""
