"""Anthropic adapter: the Messages API over `anthropic.AsyncAnthropic`, streamed as raw events.

anthropic 2.x has no `temperature`/`top_p`/`top_k` arguments: sampling params travel in
`extra_body`. `max_tokens` is mandatory on this API (default 4096).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

import anthropic

from orchestrator.errors import ProviderError
from orchestrator.llm import convert
from orchestrator.llm.adapter import Deadline, SdkAdapter
from orchestrator.llm.base import (
    Message,
    OutputSchema,
    StopReason,
    StreamItem,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    TurnEnd,
    Usage,
)
from orchestrator.llm.retry import SdkErrors
from orchestrator.llm.tls import tls_context

DEFAULT_MAX_TOKENS = 4096
# Anthropic's `overloaded_error` arrives as HTTP 529, already covered by "5xx is retryable".


def build_sdk_client(base_url: str | None, api_key: str, timeout_s: float) -> anthropic.AsyncAnthropic:
    """The SDK client with its own retries off: `retry.py` owns retries, so none are doubled.

    `timeout_s` is the SDK's HTTP-level timeout, a backstop: the adapter's `Deadline` cuts first.
    The HTTP client is the SDK's default one, on the process's shared TLS context (`tls.py`).
    """
    http = anthropic.DefaultAsyncHttpxClient(timeout=timeout_s, verify=tls_context())  # the SDK's defaults
    return anthropic.AsyncAnthropic(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s, http_client=http
    )


class _Usage:
    """Running usage: `message_delta` totals are cumulative and overwrite `message_start`'s."""

    def __init__(self) -> None:
        self.input = self.output = self.cache_read = self.cache_write = 0

    def update(self, u: Any) -> None:
        for field, attr in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
        ):
            value = getattr(u, attr, None)
            if value is not None:
                setattr(self, field, value)

    def result(self) -> Usage:
        # Anthropic's input_tokens excludes cache reads and writes; the port counts the whole prompt.
        total = self.input + self.cache_read + self.cache_write
        return Usage(input_tokens=total, output_tokens=self.output, cached_input_tokens=self.cache_read)


class AnthropicClient(SdkAdapter[anthropic.AsyncAnthropic]):
    """The Messages API (`POST /v1/messages`), backend types `claude` / `anthropic`."""

    provider = "anthropic"
    errors = SdkErrors(
        status=anthropic.APIStatusError,
        timeout=anthropic.APITimeoutError,
        connection=anthropic.APIConnectionError,
        validation=anthropic.APIResponseValidationError,
    )
    default_max_tokens = DEFAULT_MAX_TOKENS

    async def _attempt(
        self,
        clock: Deadline,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        output: OutputSchema | None,
    ) -> AsyncGenerator[StreamItem, None]:
        if output is not None:  # the team file refuses `tool_calls: false` for claude (see team.py)
            raise self._error("structured output is not supported by the Messages adapter", retryable=False)
        params: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "messages": convert.anthropic_messages(messages),
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = convert.anthropic_tools(tools)
        stream = await clock.wait(
            self._client.messages.create(
                **params, stream=True, timeout=self._timeout_s, extra_body=self._extra or None
            )
        )
        usage = _Usage()
        stop: str | None = None
        blocks: dict[int, list[str]] = {}  # tool_use block index -> [id, name, partial JSON...]
        async with stream:  # closing the stream closes the HTTP response (cancellation)
            while (event := await clock.next(stream)) is not None:
                if event.type == "message_start":
                    usage.update(event.message.usage)
                elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                    blocks[event.index] = [event.content_block.id, event.content_block.name]
                elif event.type == "content_block_delta":
                    if event.delta.type == "text_delta":
                        yield TextDelta(text=event.delta.text)
                    elif event.delta.type == "input_json_delta" and event.index in blocks:
                        blocks[event.index].append(event.delta.partial_json)
                elif event.type == "content_block_stop" and event.index in blocks:
                    call_id, name, *parts = blocks.pop(event.index)
                    yield ToolCallReady(call=convert.parse_tool_call(call_id, name, "".join(parts)))
                elif event.type == "message_delta":
                    stop = event.delta.stop_reason or stop
                    usage.update(event.usage)
                elif event.type == "message_stop":
                    yield TurnEnd(stop_reason=self._stop_reason(stop), usage=usage.result())
                    return
        raise ProviderError(self.provider, self._model, None, True, "stream ended before message_stop")

    def _stop_reason(self, stop: str | None) -> StopReason:
        """The turn's stop reason; a missing one (a broken stream) or a refusal is a provider error.

        `max_tokens` is returned as such (the caller decides, see `ChatCompletionsClient`).
        """
        if stop is None:
            raise self._error("message_stop without a stop_reason", retryable=True)
        if stop == "refusal":
            raise self._error(
                "stop_reason refusal: the provider's filter stopped the answer", retryable=False
            )
        return convert.anthropic_stop_reason(stop)
