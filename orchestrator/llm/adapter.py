"""What every SDK adapter shares: settings, the retry wrapper, error mapping and closing.

A vendor adapter (`openai.py`, `anthropic.py`) subclasses `SdkAdapter`, names its provider and
its SDK's error classes, and implements `_attempt`: one streamed HTTP call mapped onto the port.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from orchestrator.errors import ProviderError
from orchestrator.llm.base import Message, StreamItem, ToolSpec
from orchestrator.llm.retry import RetryPolicy, SdkErrors, classify_sdk_error, stream_with_retries

NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


class _Closable(Protocol):
    async def close(self) -> None: ...


SdkClient = TypeVar("SdkClient", bound=_Closable)


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
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        extra: Mapping[str, Any] = NO_EXTRA,
    ) -> None:
        self._client = client
        self._model = model
        self._max_tokens = max_tokens or self.default_max_tokens
        self._timeout_s = timeout_s  # per HTTP call: connect, and each wait for the next bytes
        self._retry = retry or RetryPolicy()
        self._extra = dict(extra)  # provider params (temperature, reasoning, ...) sent verbatim

    @property
    def model(self) -> str:
        return self._model

    async def close(self) -> None:
        """Close the SDK client's connection pool."""
        await self._client.close()

    def stream_turn(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[StreamItem]:
        """Stream one assistant turn; raises `ProviderError` once retries are exhausted."""
        return stream_with_retries(
            lambda: self._attempt(system, messages, tools),
            lambda exc: classify_sdk_error(exc, self.errors, self.provider, self._model),
            self._retry,
        )

    def _attempt(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncGenerator[StreamItem, None]:
        raise NotImplementedError

    def _error(self, message: str, *, retryable: bool) -> ProviderError:
        return ProviderError(self.provider, self._model, None, retryable, message)
