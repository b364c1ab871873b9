"""Each model request is admitted under its provider's name, within the call's deadline; one not
admitted in time fails as a provider error and never reaches the provider."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from orchestrator.errors import ProviderError
from orchestrator.llm import UserMessage, make_model_client
from orchestrator.llm.adapter import UNLIMITED
from orchestrator.ports import CallAdmission, ModelClient
from tests.fakes.provider_server import ProviderServer, Reply


class Recording:
    """An admission that records who asked, and admits (or refuses) at once."""

    def __init__(self, *, full: bool = False) -> None:
        self.asked: list[tuple[str, float]] = []
        self.full = full

    @contextlib.asynccontextmanager
    async def admit(self, provider: str, *, within: float) -> AsyncIterator[None]:
        self.asked.append((provider, within))
        if self.full:
            raise TimeoutError
        yield


async def _turn(client: ModelClient) -> None:
    async for _ in client.stream_turn(system="", messages=[UserMessage(text="hi")], tools=[]):
        pass


@pytest.mark.parametrize(
    ("type", "key"), [("claude", "anthropic"), ("openai", "openai"), ("chatcompletion", "chatcompletion")]
)
async def test_requests_are_admitted_under_the_backend_type(type: str, key: str) -> None:
    admission = Recording()
    async with ProviderServer(lambda _: Reply(text="ok")) as server:
        url = server.anthropic_base_url if type == "claude" else server.openai_base_url
        client = make_model_client(
            type=type, model="m", base_url=url, api_key="k", call_timeout_s=30, admission=admission
        )
        await _turn(client)
        await client.close()
    [(provider, within)] = admission.asked
    assert provider == key
    assert 0 < within <= 30  # never longer than the call's own deadline


async def test_a_request_not_admitted_in_time_fails_and_is_never_sent() -> None:
    admission = Recording(full=True)
    async with ProviderServer(lambda _: Reply(text="ok")) as server:
        client = make_model_client(
            type="groq", model="m", base_url=server.openai_base_url, api_key="k", admission=admission
        )
        with pytest.raises(ProviderError, match=r"not admitted within .* groq's limit is full"):
            await _turn(client)
        await client.close()
        assert server.requests == []
    assert [p for p, _ in admission.asked] == ["groq"]


def test_the_default_admits_everything() -> None:
    default: CallAdmission = UNLIMITED
    assert isinstance(default.admit("openai", within=1.0), contextlib.nullcontext)
