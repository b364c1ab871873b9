"""Shared set-up for the adapter tests: strict SDK clients pointed at the loopback server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from orchestrator.llm.anthropic import AnthropicClient
from orchestrator.llm.base import (
    Message,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    TurnEnd,
    UserMessage,
)
from orchestrator.llm.openai import ChatCompletionsClient, OpenAIResponsesClient
from orchestrator.llm.retry import RetryPolicy
from tests.fakes.provider_server import ProviderServer

APIS = ["responses", "chat", "messages"]
FAST_RETRY = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05)
SHELL = ToolSpec(
    name="shell",
    description="Run a command.",
    parameters={"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
)

Adapter = OpenAIResponsesClient | ChatCompletionsClient | AnthropicClient


def make_adapter(
    api: str,
    server: ProviderServer,
    *,
    idle_timeout_s: float = 5.0,
    call_timeout_s: float = 10.0,
    retry: RetryPolicy = FAST_RETRY,
    strict: bool = True,
    **kw: Any,
) -> Adapter:
    """An adapter over a strict SDK client: every response must validate against the SDK's models."""
    limits: dict[str, Any] = {"idle_timeout_s": idle_timeout_s, "call_timeout_s": call_timeout_s}
    if api == "messages":
        anthropic_sdk = AsyncAnthropic(
            base_url=server.anthropic_base_url, api_key="k", max_retries=0, _strict_response_validation=strict
        )
        return AnthropicClient(anthropic_sdk, f"claude-{api}", retry=retry, **limits, **kw)
    openai_sdk = AsyncOpenAI(
        base_url=server.openai_base_url, api_key="k", max_retries=0, _strict_response_validation=strict
    )
    cls = OpenAIResponsesClient if api == "responses" else ChatCompletionsClient
    return cls(openai_sdk, f"gpt-{api}", retry=retry, **limits, **kw)


async def collect(
    client: Adapter,
    messages: Sequence[Message] = (UserMessage(text="hello"),),
    tools: Sequence[ToolSpec] = (SHELL,),
    system: str = "You are terse.",
) -> list[StreamItem]:
    """Every item of one streamed turn."""
    return [item async for item in client.stream_turn(system=system, messages=messages, tools=tools)]


def text_of(items: Sequence[StreamItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, TextDelta))


def calls_of(items: Sequence[StreamItem]) -> list[ToolCall]:
    return [i.call for i in items if isinstance(i, ToolCallReady)]


def end_of(items: Sequence[StreamItem]) -> TurnEnd:
    assert isinstance(items[-1], TurnEnd), items
    assert sum(isinstance(i, TurnEnd) for i in items) == 1
    return items[-1]


async def drain(stream: AsyncIterator[StreamItem], into: list[StreamItem]) -> None:
    """Append every item to `into` (kept when the stream fails part-way)."""
    async for item in stream:
        into.append(item)
