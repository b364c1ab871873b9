"""A broken provider answering HTTP 200: cut streams, bodies that are not the API's, hangs and stalls.

Each fault is a retryable `ProviderError` (never a normal end of turn): retried while no output has
reached the caller, raised with the attempt count once the policy gives up. Filters are final.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator

import pytest

from orchestrator.errors import ProviderError
from orchestrator.llm.base import StreamItem, TextDelta, TurnEnd
from orchestrator.llm.retry import RetryPolicy
from tests.fakes.provider_server import ProviderServer, Reply, scripted
from tests.orchestrator.llm.helpers import APIS, calls_of, collect, drain, end_of, make_adapter

TWO_ATTEMPTS = RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02)
CALL = ("shell", {"cmd": "ls -la /tmp"})  # a tool call reaches the caller only once complete
# (fault, words of the error). Every fault happens before the first item reaches the caller.
FAULTS = {
    "cut": (Reply(tool_calls=[CALL], cut=True), "ended"),
    "html": (Reply(malformed="html"), "ended"),
    "not_json": (Reply(malformed="data"), "malformed response: data is not JSON"),
    "wrong_shape": (Reply(malformed="shape"), ""),  # strict SDK: malformed; lenient: ended or malformed
    "hang_before_headers": (Reply(hang_before_headers=True), "no data for 0.2 s (idle_timeout_seconds)"),
    "stall_mid_stream": (Reply(tool_calls=[CALL], hang=True), "no data for 0.2 s (idle_timeout_seconds)"),
}
HANGS = {"hang_before_headers", "stall_mid_stream"}


def idle_for(fault: str) -> float:
    """A short idle limit for the hangs; a generous one elsewhere, so load never trips it."""
    return 0.2 if fault in HANGS else 5.0


@pytest.fixture
async def server() -> AsyncIterator[ProviderServer]:
    async with ProviderServer(scripted()) as s:
        yield s


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "lenient"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("api", APIS)
async def test_a_fault_is_retried_and_the_retry_succeeds(
    api: str, fault: str, strict: bool, server: ProviderServer
) -> None:
    server.handler = scripted(FAULTS[fault][0], Reply(tool_calls=[CALL]))
    client = make_adapter(api, server, idle_timeout_s=idle_for(fault), retry=TWO_ATTEMPTS, strict=strict)
    items = await collect(client)
    await client.close()
    assert [c.arguments for c in calls_of(items)] == [CALL[1]]
    assert end_of(items).stop_reason == "tool_use"
    assert len(server.requests) == 2


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("api", APIS)
async def test_a_persistent_fault_is_a_retryable_error_after_the_last_attempt(
    api: str, fault: str, server: ProviderServer
) -> None:
    reply, words = FAULTS[fault]
    server.handler = scripted(reply, reply)
    client = make_adapter(api, server, idle_timeout_s=idle_for(fault), retry=TWO_ATTEMPTS)
    seen: list[StreamItem] = []
    with pytest.raises(ProviderError) as info:
        await drain(client.stream_turn(system="", messages=[], tools=[]), seen)
    await client.close()
    assert seen == []
    assert (info.value.status, info.value.retryable) == (None, True)
    assert words in info.value.message
    assert info.value.message.endswith("(after 2 attempts)")
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
async def test_a_cut_after_output_raises_instead_of_ending_the_turn(api: str, server: ProviderServer) -> None:
    server.handler = scripted(Reply(text="one two three four five six", cut=True), Reply(text="replayed"))
    client = make_adapter(api, server)
    seen: list[StreamItem] = []
    with pytest.raises(ProviderError) as info:
        await drain(client.stream_turn(system="", messages=[], tools=[]), seen)
    await client.close()
    assert seen
    assert all(isinstance(i, TextDelta) for i in seen)  # no TurnEnd: the text is not an answer
    assert info.value.retryable  # marked transient; not replayed, since output already reached the caller
    assert len(server.requests) == 1


@pytest.mark.parametrize(("api", "stop"), [("chat", ""), ("messages", "")], ids=["chat", "messages"])
async def test_an_end_without_a_stop_reason_is_a_cut(api: str, stop: str, server: ProviderServer) -> None:
    # The stream is complete ([DONE] / message_stop) but never says why the model stopped.
    reply = Reply(tool_calls=[CALL], finish_reason=stop)
    server.handler = scripted(reply, reply)
    client = make_adapter(api, server, retry=TWO_ATTEMPTS)
    seen: list[StreamItem] = []
    with pytest.raises(ProviderError) as info:
        await drain(client.stream_turn(system="", messages=[], tools=[]), seen)
    await client.close()
    assert info.value.retryable
    assert "stop_reason" in info.value.message or "finish_reason" in info.value.message
    assert not any(isinstance(i, TurnEnd) for i in seen)
    # Chat Completions hands out tool calls at the end, so it retries; Messages already gave the call.
    assert len(server.requests) == (2 if api == "chat" else 1)


@pytest.mark.parametrize(
    ("api", "reason"),
    [("chat", "content_filter"), ("responses", "content_filter"), ("messages", "refusal")],
    ids=["chat", "responses", "messages"],
)
async def test_a_filtered_answer_is_a_final_error(api: str, reason: str, server: ProviderServer) -> None:
    server.handler = scripted(Reply(tool_calls=[CALL], finish_reason=reason), Reply(tool_calls=[CALL]))
    client = make_adapter(api, server, retry=TWO_ATTEMPTS)
    with pytest.raises(ProviderError) as info:
        await collect(client)
    await client.close()
    assert not info.value.retryable  # the same request would be filtered again
    assert "filter" in info.value.message
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", ["chat", "messages"])  # Responses' `max_output_tokens`: test_adapters.py
async def test_length_ends_the_turn_flagged_as_max_tokens(api: str, server: ProviderServer) -> None:
    server.handler = scripted(Reply(text="a long answer", truncated=True))
    client = make_adapter(api, server, retry=TWO_ATTEMPTS)
    items = await collect(client)
    await client.close()
    assert end_of(items).stop_reason == "max_tokens"
    assert len(server.requests) == 1  # not retried: the same request would be cut again


@pytest.mark.parametrize("api", APIS)
async def test_keep_alives_do_not_outlast_the_call_deadline(api: str, server: ProviderServer) -> None:
    reply = Reply(tool_calls=[CALL], keepalive=0.02)  # bytes keep coming, the answer never does
    server.handler = scripted(reply, reply)
    client = make_adapter(api, server, idle_timeout_s=5.0, call_timeout_s=0.3, retry=TWO_ATTEMPTS)
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await collect(client)
    elapsed = time.monotonic() - started
    await client.close()
    assert info.value.retryable
    assert info.value.message == "timed out: the call took over 0.3 s (call_timeout_seconds)"
    assert 0.3 <= elapsed < 2.0  # far from the 5 s idle limit
    # The deadline covers the retries: none starts past it. (On a loaded machine the first request
    # may not even have reached the server within 0.3 s: then none did.)
    assert len(server.requests) <= 1
    if server.requests:
        await server.wait_for(disconnects=1)  # abandoned by the client, not left open


@pytest.mark.parametrize("api", APIS)
async def test_retries_stop_at_the_call_deadline(api: str, server: ProviderServer) -> None:
    server.handler = scripted(*[Reply(hang_before_headers=True)] * 10)
    policy = RetryPolicy(max_attempts=10, base_delay=0.01, max_delay=0.02)
    client = make_adapter(api, server, idle_timeout_s=0.1, call_timeout_s=0.45, retry=policy)
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await collect(client)
    elapsed = time.monotonic() - started
    await client.close()
    assert info.value.retryable
    made = re.search(r"\(after (\d+) attempts\)$", info.value.message)
    assert made is not None
    # Idle cuts each attempt and the call deadline ends the retries, well before ten; a cut may come
    # before the request reached the server (the last one's, always under load).
    assert 2 <= int(made.group(1)) <= 6
    assert 1 <= len(server.requests) <= int(made.group(1))
    assert 0.2 <= elapsed < 2.0  # ten hangs do not add up: about the 0.45 s call deadline
