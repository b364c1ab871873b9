"""Pay the SDKs' first-call costs at boot, off the event loop.

The first streamed call through each SDK imports its resource modules lazily and builds pydantic
schemas for the stream event types: about 150 ms for the Responses API, 40 ms for Chat Completions
and 20 ms for Messages, all of it blocking the event loop that also acks Slack requests. The bot
runs `warm_up` in a thread at start-up: one turn per API through our own adapter, against canned
streams (`warmup/*.sse`) served by an in-memory transport. Nothing leaves the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from importlib import resources

import httpx2

from orchestrator.llm.base import ToolSpec, UserMessage
from orchestrator.llm.stats import PROVIDER_STATS
from orchestrator.ports import ModelClient

log = logging.getLogger(__name__)

_TOOLS = (ToolSpec(name="t", description="warm-up", parameters={"type": "object", "properties": {}}),)
_OFFLINE = "http://warmup.invalid"


def _canned(api: str) -> httpx2.AsyncClient:
    body = resources.files("orchestrator.llm").joinpath(f"warmup/{api}.sse").read_bytes()

    def respond(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(respond))


def _api(backend_type: str) -> str:
    if backend_type == "openai":
        return "responses"
    return "messages" if backend_type in ("claude", "anthropic") else "chat"


def _client(api: str, http: httpx2.AsyncClient) -> ModelClient:
    if api == "messages":
        import anthropic

        from orchestrator.llm.anthropic import AnthropicClient

        sdk = anthropic.AsyncAnthropic(api_key="warm-up", base_url=_OFFLINE, http_client=http, max_retries=0)
        return AnthropicClient(sdk, "warm-up")
    import openai

    from orchestrator.llm.openai import ChatCompletionsClient, OpenAIResponsesClient

    adapter = OpenAIResponsesClient if api == "responses" else ChatCompletionsClient
    return adapter(
        openai.AsyncOpenAI(api_key="warm-up", base_url=f"{_OFFLINE}/v1", http_client=http, max_retries=0),
        "warm-up",
    )


async def _turn(api: str) -> int:
    http = _canned(api)
    try:
        stream = _client(api, http).stream_turn(
            system="", messages=[UserMessage(text="warm-up")], tools=_TOOLS
        )
        return sum([1 async for _ in stream])
    finally:
        await http.aclose()


def warm_up(types: Iterable[str]) -> list[str]:
    """Stream one canned turn per API these backend types use; returns the APIs warmed.

    Blocking: call it as `await asyncio.to_thread(warm_up, types)`. A failure is logged and
    skipped: warming is an optimisation, never a reason not to start.
    """
    warmed = []
    for api in sorted({_api(t) for t in types}):
        try:
            with PROVIDER_STATS.muted():  # canned turns are not provider calls
                turns = asyncio.run(_turn(api))
            if turns > 0:
                warmed.append(api)
        except Exception:
            log.warning("warm-up of the %s adapter failed", api, exc_info=True)
    return warmed
