"""Timeouts, cancellation and dropped streams, observed from both ends of the connection."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from orchestrator.errors import ProviderError
from orchestrator.llm.base import StreamItem, TextDelta, UserMessage
from orchestrator.llm.retry import RetryPolicy
from tests.fakes.provider_server import ProviderServer, Reply, scripted
from tests.orchestrator.llm.helpers import APIS, SHELL, Adapter, drain, make_adapter

pytestmark = pytest.mark.parametrize("api", APIS)
LONG_TEXT = "one two three four five six seven eight nine ten"


@pytest.fixture
async def server() -> AsyncIterator[ProviderServer]:
    async with ProviderServer(scripted()) as s:
        yield s


def turn(client: Adapter) -> AsyncIterator[StreamItem]:
    return client.stream_turn(system="", messages=[UserMessage(text="go")], tools=[SHELL])


async def test_timeout_before_first_byte_is_retried_then_raised(api: str, server: ProviderServer) -> None:
    server.handler = scripted(*[Reply(text="late", delay=10.0)] * 2)
    client = make_adapter(api, server, idle_timeout_s=0.2, retry=RetryPolicy(max_attempts=2, base_delay=0.01))
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        _ = [item async for item in turn(client)]
    elapsed = time.monotonic() - started
    await client.close()
    assert (info.value.status, info.value.retryable) == (None, True)
    assert "timed out" in info.value.message
    assert len(server.requests) == 2
    assert 0.4 <= elapsed < 3.0  # two 0.2 s timeouts, far from the 10 s the server would take
    await server.wait_for(disconnects=2)  # the timed-out requests were abandoned, not left open


async def test_stall_after_output_times_out_without_retry(api: str, server: ProviderServer) -> None:
    server.handler = scripted(Reply(text=LONG_TEXT, hang=True), Reply(text="replayed"))
    client = make_adapter(api, server, idle_timeout_s=0.6)  # generous: first bytes must beat it under load
    seen: list[StreamItem] = []
    with pytest.raises(ProviderError) as info:
        await drain(turn(client), seen)
    await client.close()
    assert seen
    assert all(isinstance(i, TextDelta) for i in seen)  # partial output reached the caller...
    assert info.value.retryable  # ...so the failure surfaces, marked transient, for the caller to decide
    assert len(server.requests) == 1


async def test_mid_stream_disconnect_raises_after_partial_output(api: str, server: ProviderServer) -> None:
    server.handler = scripted(Reply(text=LONG_TEXT, disconnect=True), Reply(text="replayed"))
    client = make_adapter(api, server)
    seen: list[StreamItem] = []
    with pytest.raises(ProviderError) as info:
        await drain(turn(client), seen)
    await client.close()
    assert seen
    assert LONG_TEXT.startswith("".join(i.text for i in seen if isinstance(i, TextDelta)))
    assert (info.value.status, info.value.retryable) == (None, True)
    assert len(server.requests) == 1


async def test_close_closes_the_http_stream(api: str, server: ProviderServer) -> None:
    server.handler = scripted(Reply(text=LONG_TEXT, hang=True))
    client = make_adapter(api, server, idle_timeout_s=30.0)
    stream = turn(client)
    first = await anext(stream)
    assert isinstance(first, TextDelta)
    await stream.aclose()  # type: ignore[attr-defined]
    await server.wait_for(disconnects=1, timeout=5.0)
    await client.close()


async def test_task_cancellation_closes_the_http_stream(api: str, server: ProviderServer) -> None:
    server.handler = scripted(Reply(text=LONG_TEXT, hang=True))
    client = make_adapter(api, server, idle_timeout_s=30.0)
    got_output = asyncio.Event()

    async def consume() -> None:
        async for _ in turn(client):
            got_output.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_output.wait(), 5.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await server.wait_for(disconnects=1, timeout=5.0)
    assert len(server.requests) == 1
    await client.close()
