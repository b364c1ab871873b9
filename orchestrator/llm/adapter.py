"""What every SDK adapter shares: settings, the retry wrapper, deadlines, error mapping and closing.

A vendor adapter (`openai.py`, `anthropic.py`) subclasses `SdkAdapter`, names its provider and
its SDK's error classes, and implements `_attempt`: one streamed HTTP call mapped onto the port,
paced by the call's `Deadline` so that a provider that hangs or stalls is cut (a retryable error).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from orchestrator.errors import ProviderError
from orchestrator.llm.base import Message, OutputSchema, StreamItem, ToolSpec
from orchestrator.llm.retry import RetryPolicy, SdkErrors, classify_sdk_error, stream_with_retries
from orchestrator.llm.stats import PROVIDER_STATS

if TYPE_CHECKING:
    from orchestrator.ports import CallAdmission

NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


class _Closable(Protocol):
    async def close(self) -> None: ...


SdkClient = TypeVar("SdkClient", bound=_Closable)
T = TypeVar("T")
DEFAULT_CALL_TIMEOUT_S = 120.0
DEFAULT_IDLE_TIMEOUT_S = 30.0


class Deadline:
    """One model call's clock: all of it (retries included) within `call_s`, never `idle_s` idle.

    The idle limit covers each wait for response headers and each wait for the next event the SDK
    yields (keep-alives do not count: the SDKs drop SSE comments and Anthropic `ping` events,
    though they keep the SDK's own HTTP read timeout from firing); the call limit bounds a
    provider that streams slowly but never finishes, and the retries of one that keeps failing,
    so that `max_attempts` hangs cannot add up. Either one expiring raises a retryable
    `ProviderError` naming the setting.
    """

    def __init__(self, call_s: float, idle_s: float, error: _ErrorFactory) -> None:
        self._loop = asyncio.get_running_loop()
        self._call_s, self._idle_s = call_s, idle_s
        self._end = self._loop.time() + call_s
        self._error = error

    def remaining(self) -> float:
        """Seconds left before the call's deadline (negative once past)."""
        return self._end - self._loop.time()

    async def wait(self, awaitable: Awaitable[T]) -> T:
        """Await one step of the call (opening it, or the next event) within both limits."""
        idle_end = self._loop.time() + self._idle_s
        limit = asyncio.timeout_at(min(self._end, idle_end))
        try:
            async with limit:
                return await awaitable
        except TimeoutError:
            if not limit.expired():
                raise
            if self._end <= idle_end:
                message = f"timed out: the call took over {self._call_s:g} s (call_timeout_seconds)"
            else:
                message = f"timed out: no data for {self._idle_s:g} s (idle_timeout_seconds)"
            raise self._error(message, retryable=True) from None

    async def next(self, stream: AsyncIterator[T]) -> T | None:
        """The stream's next event within both limits; None once the stream has ended."""
        try:
            return await self.wait(anext(stream))
        except StopAsyncIteration:
            return None


class Unlimited:
    """The default `CallAdmission`: every request starts at once, at no cost."""

    def admit(self, provider: str, *, within: float) -> AbstractAsyncContextManager[None]:
        """Admit now."""
        return contextlib.nullcontext()


UNLIMITED = Unlimited()


class _ErrorFactory(Protocol):
    def __call__(self, message: str, *, retryable: bool) -> ProviderError: ...


class SdkAdapter(Generic[SdkClient]):
    """A `ModelClient` over one SDK client; subclasses stream one attempt in `_attempt`."""

    provider: ClassVar[str]
    errors: ClassVar[SdkErrors]
    default_max_tokens: ClassVar[int | None] = None

    def __init__(
        self,
        client: SdkClient,
        model: str,
        *,
        max_tokens: int | None = None,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        extra: Mapping[str, Any] = NO_EXTRA,
        admission: CallAdmission = UNLIMITED,
        limit_key: str | None = None,
    ) -> None:
        self._client = client
        self._model = model
        self._max_tokens = max_tokens or self.default_max_tokens
        # Per call (see `Deadline`); the call limit is also the SDK's own (HTTP-level) backstop.
        self._timeout_s = call_timeout_s
        self._idle_timeout_s = idle_timeout_s
        self._retry = retry or RetryPolicy()
        self._extra = dict(extra)  # provider params (temperature, reasoning, ...) sent verbatim
        # Whose limits each attempt is admitted under (the backend type: `openai`, `anthropic`, `groq`, ...).
        self._admission = admission
        self.limit_key = limit_key or self.provider

    @property
    def model(self) -> str:
        """The model name sent to the provider."""
        return self._model

    async def close(self) -> None:
        """Close the SDK client's connection pool."""
        await self._client.close()

    def stream_turn(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        output: OutputSchema | None = None,
    ) -> AsyncIterator[StreamItem]:
        """Stream one assistant turn; raises `ProviderError` once retries are exhausted."""
        clock = Deadline(self._timeout_s, self._idle_timeout_s, self._error)
        return stream_with_retries(
            lambda: self._attempt(clock, system, messages, tools, output),
            lambda exc: classify_sdk_error(exc, self.errors, self.provider, self._model),
            self._retry,
            remaining=clock.remaining,
            record=lambda outcome, status: PROVIDER_STATS.record(self.provider, outcome, status),
            admit=lambda: self._admitted(clock),
        )

    @contextlib.asynccontextmanager
    async def _admitted(self, clock: Deadline) -> AsyncIterator[None]:
        """One attempt's admission under the provider's limits, within the call's deadline."""
        within = max(0.0, clock.remaining())
        async with contextlib.AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self._admission.admit(self.limit_key, within=within))
            except TimeoutError:
                message = f"not admitted within {within:.3g} s: {self.limit_key}'s limit is full"
                raise self._error(message, retryable=True) from None
            yield

    def _attempt(
        self,
        clock: Deadline,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        output: OutputSchema | None,
    ) -> AsyncGenerator[StreamItem, None]:
        """One streamed HTTP call: `clock.wait` for the SDK call, `clock.next` for each event."""
        raise NotImplementedError

    def _error(self, message: str, *, retryable: bool) -> ProviderError:
        return ProviderError(self.provider, self._model, None, retryable, message)
