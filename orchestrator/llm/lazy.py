"""A model client that builds its inner client on first use, then delegates every turn to it."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence

from orchestrator.llm.base import Message, OutputSchema, StreamItem, ToolSpec
from orchestrator.ports import ModelClient


class BuiltOnFirstUse(abc.ABC):
    """A `ModelClient` over an inner one that `client()` makes when the first turn needs it.

    Subclasses say how it is made (an SDK imported off the loop, an embedded server started) and
    how it is closed.
    """

    def __init__(self, model: str) -> None:
        self._model = model

    @property
    def model(self) -> str:
        """The model name sent to the provider."""
        return self._model

    @abc.abstractmethod
    async def client(self) -> ModelClient:
        """The inner client, made on the first call (a failure to make it is a `ProviderError`)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release the inner client, if it was made."""

    async def stream_turn(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        output: OutputSchema | None = None,
    ) -> AsyncIterator[StreamItem]:
        """Stream one assistant turn through the inner client (made first, if need be)."""
        inner = await self.client()
        async for item in inner.stream_turn(system=system, messages=messages, tools=tools, output=output):
            yield item
