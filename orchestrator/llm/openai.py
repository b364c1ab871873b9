"""OpenAI adapters: the Responses API and Chat Completions over `openai.AsyncOpenAI`.

Chat Completions also serves every OpenAI-compatible server (xAI, Gemini's compatible endpoint,
OpenRouter, Groq, vLLM, ollama, ...). Both stream with `stream=True` and map raw events; the SDK's
stream helpers are avoided because they re-parse tool arguments and fail on invalid JSON.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import openai

from orchestrator.llm import convert
from orchestrator.llm.adapter import Deadline, SdkAdapter
from orchestrator.llm.base import (
    Message,
    OutputSchema,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    TurnEnd,
    Usage,
)
from orchestrator.llm.retry import SdkErrors, malformed_response
from orchestrator.llm.tls import tls_context


def build_sdk_client(base_url: str | None, api_key: str, timeout_s: float) -> openai.AsyncOpenAI:
    """The SDK client with its own retries off: `retry.py` owns retries, so none are doubled.

    `timeout_s` is the SDK's HTTP-level timeout, a backstop: the adapter's `Deadline` cuts first.
    The HTTP client is the SDK's default one, on the process's shared TLS context (`tls.py`).
    """
    http = openai.DefaultAsyncHttpxClient(timeout=timeout_s, verify=tls_context())  # the SDK's defaults
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s, http_client=http
    )


class _OpenAIClient(SdkAdapter[openai.AsyncOpenAI]):
    """Shared by both OpenAI APIs: the SDK's error classes."""

    provider = "openai"
    errors = SdkErrors(
        status=openai.APIStatusError,
        timeout=openai.APITimeoutError,
        connection=openai.APIConnectionError,
        validation=openai.APIResponseValidationError,
    )


class OpenAIResponsesClient(_OpenAIClient):
    """The Responses API (`POST /responses`), backend type `openai`."""

    async def _attempt(
        self,
        clock: Deadline,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        output: OutputSchema | None,
    ) -> AsyncGenerator[StreamItem, None]:
        params: dict[str, Any] = {
            "model": self._model,
            "input": convert.responses_input(messages),
            "store": False,  # the whole conversation is sent each turn; nothing to keep server-side
        }
        if system:
            params["instructions"] = system
        if tools:
            params["tools"] = convert.responses_tools(tools)
        if self._max_tokens is not None:
            params["max_output_tokens"] = self._max_tokens
        if output is not None:
            params["text"] = {
                "format": {"type": "json_schema", "name": output.name, "schema": dict(output.schema)}
            }
        stream = await clock.wait(
            self._client.responses.create(
                **params, stream=True, timeout=self._timeout_s, extra_body=self._extra or None
            )
        )
        async with stream:  # closing the stream closes the HTTP response (cancellation)
            called = False
            while (event := await clock.next(stream)) is not None:
                if event.type == "response.output_text.delta":
                    yield TextDelta(text=event.delta)
                elif event.type == "response.output_item.done" and event.item.type == "function_call":
                    called = True
                    item = event.item
                    yield ToolCallReady(call=convert.parse_tool_call(item.call_id, item.name, item.arguments))
                elif event.type in ("response.completed", "response.incomplete"):
                    yield self._turn_end(event.response, called)
                    return
                elif event.type == "response.failed":
                    error = event.response.error
                    code = error.code if error else "unknown"
                    message = error.message if error else "response failed"
                    raise self._error(
                        f"{code}: {message}", retryable=code in ("server_error", "rate_limit_exceeded")
                    )
                elif event.type == "error":
                    raise self._error(f"{event.code}: {event.message}", retryable=False)
        raise self._error("stream ended before response.completed", retryable=True)

    def _turn_end(self, response: Any, called: bool) -> TurnEnd:
        details = response.incomplete_details
        if details is not None and details.reason == "content_filter":
            raise self._error("incomplete: the provider's content filter stopped the answer", retryable=False)
        usage = Usage()
        if response.usage is not None:
            u = response.usage
            cached = u.input_tokens_details.cached_tokens if u.input_tokens_details else 0
            usage = Usage(
                input_tokens=u.input_tokens, output_tokens=u.output_tokens, cached_input_tokens=cached
            )
        stop = convert.responses_stop_reason(response.status, details.reason if details else None, called)
        return TurnEnd(stop_reason=stop, usage=usage)


class ChatCompletionsClient(_OpenAIClient):
    """Chat Completions (`POST /chat/completions`), backend type `chatcompletion` and presets."""

    provider = "chatcompletion"

    async def _attempt(
        self,
        clock: Deadline,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        output: OutputSchema | None,
    ) -> AsyncGenerator[StreamItem, None]:
        params: dict[str, Any] = {
            "model": self._model,
            "messages": convert.chat_messages(system, messages),
            "stream_options": {"include_usage": True},
        }
        if tools:
            params["tools"] = convert.chat_tools(tools)
        if self._max_tokens is not None:
            # `max_tokens` rather than `max_completion_tokens`: compatible servers only know the old name.
            params["max_tokens"] = self._max_tokens
        if output is not None:
            # llama.cpp's server turns the schema into a grammar: the reply cannot leave it.
            schema = {"name": output.name, "schema": dict(output.schema)}
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        stream = await clock.wait(
            self._client.chat.completions.create(
                **params, stream=True, timeout=self._timeout_s, extra_body=self._extra or None
            )
        )
        calls = _ChatCalls()
        finish: str | None = None
        usage = Usage()
        async with stream:
            while (chunk := await clock.next(stream)) is not None:
                if not isinstance(getattr(chunk, "choices", None), list):
                    raise malformed_response(self.provider, self._model, "a chunk without `choices`")
                if chunk.usage is not None:  # the final chunk, with `choices == []`
                    usage = _chat_usage(chunk.usage)
                for choice in chunk.choices:
                    if choice.delta.content:
                        yield TextDelta(text=choice.delta.content)
                    for part in choice.delta.tool_calls or []:
                        calls.add(part)
                    finish = choice.finish_reason or finish
        self._check_finish(finish)
        done = calls.finished()
        for call in done:
            yield ToolCallReady(call=call)
        stop = convert.chat_stop_reason(finish)
        yield TurnEnd(stop_reason="tool_use" if done and stop == "other" else stop, usage=usage)

    def _check_finish(self, finish: str | None) -> None:
        """The stream's end must be a real one: a finish reason, and not a filter or an error.

        No `finish_reason` means the stream was cut (the SDK ends the iteration at `[DONE]` and at a
        clean end of the body alike, so `[DONE]` itself cannot be checked): retryable. `length` is
        not an error: the turn ends with `stop_reason="max_tokens"` and the caller decides, since
        the same request would be cut again and cost as much. `content_filter` would be filtered
        again too: not retryable. `error` (sent by some routers) is the upstream's failure: retryable.
        """
        if finish is None:
            raise self._error("stream ended without a finish_reason (cut off)", retryable=True)
        if finish == "content_filter":
            raise self._error(
                "finish_reason content_filter: the provider's filter stopped the answer", retryable=False
            )
        if finish == "error":
            raise self._error("finish_reason error: the upstream provider failed", retryable=True)


class _ChatCalls:
    """Streamed tool-call fragments, keyed by `index`.

    Only a call's first fragment carries `id` and the function name; later ones extend the
    arguments. Some compatible servers repeat the name in every fragment, so it is set once.
    """

    def __init__(self) -> None:
        self._slots: dict[int, list[str]] = {}  # index -> [id, name, argument text]

    def add(self, part: Any) -> None:
        slot = self._slots.setdefault(part.index, ["", "", ""])
        slot[0] = slot[0] or part.id or ""
        if part.function is not None:
            slot[1] = slot[1] or part.function.name or ""
            slot[2] += part.function.arguments or ""

    def finished(self) -> list[ToolCall]:
        # A server that sends no id still needs one unique per conversation for the tool result.
        return [
            convert.parse_tool_call(call_id or f"call_{uuid.uuid4().hex[:16]}", name, arguments)
            for _, (call_id, name, arguments) in sorted(self._slots.items())
        ]


def _chat_usage(u: Any) -> Usage:
    details = u.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    return Usage(input_tokens=u.prompt_tokens, output_tokens=u.completion_tokens, cached_input_tokens=cached)
