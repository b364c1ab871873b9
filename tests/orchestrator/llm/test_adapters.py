"""The three adapters, through the real SDKs (strict validation), against the loopback server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from orchestrator.errors import ProviderError
from orchestrator.llm.base import (
    AssistantMessage,
    Message,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tests.fakes.provider_server import ProviderServer, Reply, WireMessage, scripted
from tests.orchestrator.llm.helpers import APIS, Adapter, calls_of, collect, end_of, make_adapter, text_of

pytestmark = pytest.mark.parametrize("api", APIS)


@pytest.fixture
async def server() -> AsyncIterator[ProviderServer]:
    async with ProviderServer(scripted()) as s:
        yield s


@pytest.fixture
async def adapter(api: str, server: ProviderServer) -> AsyncIterator[Adapter]:
    client = make_adapter(api, server)
    yield client
    await client.close()


def script(server: ProviderServer, *replies: Reply) -> None:
    server.handler = scripted(*replies)


async def test_streams_text_and_usage(server: ProviderServer, adapter: Adapter) -> None:
    script(server, Reply(text="Hello there, general Kenobi.", usage=(11, 7)))
    items = await collect(adapter)
    assert text_of(items) == "Hello there, general Kenobi."
    assert sum(isinstance(i, TextDelta) for i in items) > 1  # really streamed, not one blob
    assert end_of(items).stop_reason == "end_turn"
    assert end_of(items).usage == Usage(input_tokens=11, output_tokens=7)
    [request] = server.requests
    assert (request.stream, request.system, request.tools) == (True, "You are terse.", ["shell"])


async def test_default_usage_matches_what_the_server_counted(
    server: ProviderServer, adapter: Adapter
) -> None:
    script(server, Reply(text="ok"))
    items = await collect(adapter, messages=[UserMessage(text="x" * 400)])
    assert end_of(items).usage.input_tokens == server.prompt_tokens_total > 100


@pytest.mark.parametrize(
    "calls",
    [[("shell", {"cmd": "ls"})], [("shell", {"cmd": "ls"}), ("shell", {"cmd": "pwd"}), ("noop", {})]],
    ids=["single", "parallel"],
)
async def test_streams_tool_calls(
    server: ProviderServer, adapter: Adapter, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    script(server, Reply(text="Let me look.", tool_calls=list(calls)))
    items = await collect(adapter)
    got = calls_of(items)
    assert [(c.name, dict(c.arguments), c.raw_arguments) for c in got] == [(n, a, "") for n, a in calls]
    assert len({c.id for c in got}) == len(calls)
    assert all(got_id.id for got_id in got)
    assert text_of(items) == "Let me look."
    assert end_of(items).stop_reason == "tool_use"


async def test_invalid_tool_json_is_delivered_raw(server: ProviderServer, adapter: Adapter) -> None:
    script(server, Reply(tool_calls=[("shell", '{"cmd": "ls'), ("shell", "[1, 2]")]))
    got = calls_of(await collect(adapter))
    assert [(c.arguments, c.raw_arguments) for c in got] == [({}, '{"cmd": "ls'), ({}, "[1, 2]")]


async def test_max_tokens_stop_reason(server: ProviderServer, adapter: Adapter) -> None:
    script(server, Reply(text="cut off", truncated=True))
    assert end_of(await collect(adapter)).stop_reason == "max_tokens"


async def test_conversation_round_trips_to_the_wire(server: ProviderServer, adapter: Adapter) -> None:
    script(server, Reply(text="done"))
    call = ToolCall(id="call_a", name="shell", arguments={"cmd": "ls"})
    bad = ToolCall(id="call_b", name="shell", arguments={}, raw_arguments="{oops")
    history: list[Message] = [
        UserMessage(text="list files"),
        AssistantMessage(text="Sure.", tool_calls=(call, bad)),
        ToolResultMessage(call_id="call_a", name="shell", content="a.txt"),
        ToolResultMessage(call_id="call_b", name="shell", content="bad json", is_error=True),
        UserMessage(text="thanks"),
    ]
    await collect(adapter, messages=history)
    [request] = server.requests
    error_text = "bad json" if request.api == "messages" else "ERROR: bad json"
    assert request.messages == [
        WireMessage(role="user", text="list files"),
        WireMessage(
            role="assistant",
            text="Sure.",
            tool_calls=[("shell", {"cmd": "ls"}), ("shell", {"_raw": "{oops"})],
        )
        if request.api != "messages"
        else WireMessage(
            role="assistant", text="Sure.", tool_calls=[("shell", {"cmd": "ls"}), ("shell", {})]
        ),
        WireMessage(role="tool", text="a.txt", call_id="call_a"),
        WireMessage(role="tool", text=error_text, call_id="call_b"),
        WireMessage(role="user", text="thanks"),
    ]
    if request.api == "messages":
        assert request.raw["messages"][2]["content"][1]["is_error"] is True


@pytest.mark.parametrize(("header", "wait"), [("retry_after", 0.3), ("retry_after_ms", 250.0)])
async def test_429_honours_retry_after(
    server: ProviderServer, adapter: Adapter, header: str, wait: float
) -> None:
    limited = (
        Reply(error=429, retry_after=wait)
        if header == "retry_after"
        else Reply(error=429, retry_after_ms=wait)
    )
    script(server, limited, Reply(text="finally"))
    items = await collect(adapter)
    assert text_of(items) == "finally"
    first, second = server.requests
    seconds = wait / 1000 if header == "retry_after_ms" else wait
    gap = second.received_at - first.received_at
    assert seconds - 0.01 <= gap < seconds + 2.0


async def test_500_is_retried_then_succeeds(server: ProviderServer, adapter: Adapter) -> None:
    script(server, Reply(error=500), Reply(error=503), Reply(text="recovered"))
    assert text_of(await collect(adapter)) == "recovered"
    assert len(server.requests) == 3


@pytest.mark.parametrize("status", [400, 422])
async def test_client_errors_are_not_retried(server: ProviderServer, adapter: Adapter, status: int) -> None:
    script(server, Reply(error=status), Reply(text="never"))
    with pytest.raises(ProviderError) as info:
        await collect(adapter)
    assert (info.value.status, info.value.retryable) == (status, False)
    assert info.value.model == adapter.model
    assert len(server.requests) == 1


async def test_exhausted_retries_raise_provider_error(server: ProviderServer, adapter: Adapter) -> None:
    script(server, *[Reply(error=502)] * 5)
    with pytest.raises(ProviderError) as info:
        await collect(adapter)
    assert (info.value.status, info.value.retryable) == (502, True)
    assert len(server.requests) == 4  # FAST_RETRY.max_attempts


async def test_retry_after_beyond_the_ceiling_fails_fast(server: ProviderServer, adapter: Adapter) -> None:
    script(server, Reply(error=429, retry_after=3600), Reply(text="never"))
    with pytest.raises(ProviderError) as info:
        await collect(adapter)
    assert (info.value.status, info.value.retry_after) == (429, 3600)
    assert len(server.requests) == 1
