"""The factory: backend types, key resolution, presets, and a real turn per type."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from typing import Any

import pytest

from orchestrator.config.presets import PRESETS
from orchestrator.errors import ProviderConfigError, ProviderError
from orchestrator.llm.anthropic import AnthropicClient
from orchestrator.llm.deferred import DeferredClient
from orchestrator.llm.factory import (
    PLACEHOLDER_API_KEY,
    make_model_client,
)
from orchestrator.llm.openai import ChatCompletionsClient, OpenAIResponsesClient
from orchestrator.ports import ModelClient
from orchestrator.testing import ScriptedModelClient, Turn
from tests.fakes.provider_server import ProviderServer, Reply, scripted
from tests.orchestrator.llm.helpers import collect, end_of, text_of


async def built(client: ModelClient) -> Any:
    """The adapter a factory-made client builds (in the loader thread) for its first turn."""
    assert isinstance(client, DeferredClient)
    return await client.client()


def sdk_of(adapter: Any) -> Any:
    return adapter._client  # the SDK client the adapter wraps: what a request would use


@pytest.mark.parametrize(
    ("kind", "cls", "url"),
    [
        # No base_url: the SDK's own variable decides, which conftest points at a closed port.
        ("openai", OpenAIResponsesClient, "http://127.0.0.1:9/v1/"),
        ("chatcompletion", ChatCompletionsClient, "http://127.0.0.1:9/v1/"),
        ("claude", AnthropicClient, "http://127.0.0.1:9"),
        ("anthropic", AnthropicClient, "http://127.0.0.1:9"),
        ("groq", ChatCompletionsClient, "https://api.groq.com/openai/v1/"),
        ("grok", ChatCompletionsClient, "https://api.x.ai/v1/"),
    ],
)
async def test_types_map_to_adapters_and_endpoints(kind: str, cls: type, url: str) -> None:
    env = {"OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "a", "GROQ_API_KEY": "g", "XAI_API_KEY": "x"}
    client = make_model_client(type=kind, model="m", env=env)
    adapter = await built(client)
    assert isinstance(adapter, cls)
    assert str(sdk_of(adapter).base_url) == url
    assert sdk_of(adapter).max_retries == 0  # our retry layer owns retries
    await client.close()


@pytest.mark.parametrize(
    ("kwargs", "env", "key"),
    [
        ({"type": "openai", "api_key": "given"}, {"OPENAI_API_KEY": "env"}, "given"),
        ({"type": "openai"}, {"OPENAI_API_KEY": "env"}, "env"),
        ({"type": "claude"}, {"ANTHROPIC_API_KEY": "env"}, "env"),
        ({"type": "chatcompletion", "base_url": "http://127.0.0.1:1/v1"}, {}, PLACEHOLDER_API_KEY),
        ({"type": "openai"}, {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, PLACEHOLDER_API_KEY),
        ({"type": "ollama"}, {}, PLACEHOLDER_API_KEY),
        ({"type": "groq"}, {"GROQ_API_KEY": "gk", "OPENAI_API_KEY": "wrong"}, "gk"),
        ({"type": "chatcompletion", "api_key_env": "MY_KEY"}, {"MY_KEY": "mine"}, "mine"),
    ],
)
async def test_api_key_resolution(kwargs: dict[str, Any], env: dict[str, str], key: str) -> None:
    client = make_model_client(model="m", env=env, **kwargs)
    assert sdk_of(await built(client)).api_key == key
    await client.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"type": "openai"}, "set OPENAI_API_KEY"),
        ({"type": "claude"}, "set ANTHROPIC_API_KEY"),
        ({"type": "groq"}, "set GROQ_API_KEY"),
        ({"type": "gemini"}, "set GEMINI_API_KEY"),
        ({"type": "bard"}, "unknown backend type 'bard'"),
        ({"type": "openai", "model": ""}, "model must not be empty"),
        ({"type": "openai", "api_key": "k", "idle_timeout_s": 0}, "idle_timeout_s must be > 0"),
    ],
)
def test_misconfiguration_fails_with_a_clear_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ProviderConfigError, match=message):
        make_model_client(**{"model": "m", **kwargs}, env={})


def test_presets_are_well_formed() -> None:
    for name, (url, env_var) in PRESETS.items():
        assert url.startswith(("https://", "http://127.0.0.1")), name
        assert env_var is None or env_var.endswith("_API_KEY"), name


@pytest.mark.parametrize("kind", ["openai", "chatcompletion", "claude", "vllm"])
async def test_a_turn_through_each_type(kind: str) -> None:
    async with ProviderServer(scripted(Reply(text="it works", usage=(3, 2)))) as server:
        url = server.anthropic_base_url if kind == "claude" else server.openai_base_url
        client = make_model_client(type=kind, model=f"{kind}-model", base_url=url, extra={"temperature": 0.2})
        items = await collect(client)  # type: ignore[arg-type]
        await client.close()
    assert text_of(items) == "it works"
    assert end_of(items).usage.output_tokens == 2
    [request] = server.requests
    assert request.model == f"{kind}-model"
    assert request.raw["temperature"] == 0.2  # provider params ride in the body (extra_body)
    if kind == "claude":
        assert request.raw["max_tokens"] == 4096
        # anthropic 2.14 sends the key as a Bearer token; earlier 2.x used x-api-key.
        auth = request.headers.get("authorization", "") + request.headers.get("x-api-key", "")
        assert PLACEHOLDER_API_KEY in auth


def test_neither_the_factory_nor_a_client_imports_an_sdk_before_its_first_turn() -> None:
    code = (
        "import sys; from orchestrator.llm.factory import make_model_client as make\n"
        "clients = [make(type=t, model='m', api_key='k') for t in ('openai', 'claude', 'groq')]\n"
        "print(sorted({'openai', 'anthropic'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_the_sdk_loads_once_in_the_loader_thread_and_clients_build_on_the_loop() -> None:
    loads: list[str] = []
    builds: list[str] = []

    def load() -> None:
        loads.append(threading.current_thread().name)

    def build() -> ModelClient:
        builds.append(threading.current_thread().name)
        return ScriptedModelClient(Turn(text="hi"))

    provider = f"scripted-{id(loads)}"  # the loaded SDKs are the process's: a name of this test's own
    client = DeferredClient(build, provider=provider, model="m", load=load)
    other = DeferredClient(build, provider=provider, model="m", load=load)
    first, second, third = await asyncio.gather(client.client(), client.client(), other.client())
    assert first is second
    assert first is not third
    assert len(loads) == 1  # one import for the provider, however many clients
    assert loads[0].startswith("sdk-loader")
    assert builds == [threading.current_thread().name] * 2
    assert text_of(await collect(client)) == "hi"  # type: ignore[arg-type]
    await client.close()
    assert isinstance(first, ScriptedModelClient)
    assert first.closed


async def test_a_client_that_cannot_be_built_is_a_provider_error() -> None:
    def build() -> ModelClient:
        raise ValueError("bad base URL")

    client = DeferredClient(build, provider="openai", model="m", load=lambda: None)
    with pytest.raises(
        ProviderError, match="cannot build the openai client: ValueError: bad base URL"
    ) as caught:
        await collect(client)  # type: ignore[arg-type]
    assert not caught.value.retryable
    await client.close()  # nothing was built: nothing to close


@pytest.mark.parametrize(
    ("kind", "prefix", "path"),
    [
        ("openai", "/v1", "/responses"),
        ("chatcompletion", "/v1", "/chat/completions"),
        ("claude", "", "/v1/messages"),
    ],
)
async def test_a_connection_error_names_the_url_tried(kind: str, prefix: str, path: str) -> None:
    with socket.socket() as closed:  # bound, never listening: every connection is refused
        closed.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{closed.getsockname()[1]}{prefix}"
        client = make_model_client(type=kind, model="m", base_url=base, api_key="k", max_attempts=1)
        with pytest.raises(ProviderError) as caught:
            await collect(client)  # type: ignore[arg-type]
        await client.close()
    assert caught.value.retryable
    assert f"connection failed to {base}{path}" in str(caught.value)


def test_preload_starts_each_sdk_once_in_the_teams_order_and_only_those_used() -> None:
    """A fresh interpreter: the SDKs load in the loader thread at once, in the agents' order."""
    code = (
        "import sys\n"
        "from orchestrator.llm import deferred, preload_sdks\n"
        "order = []\n"
        "original = deferred.start_loading\n"
        "def spy(provider, load):\n"
        "    order.append(provider)\n"
        "    return original(provider, load)\n"
        "deferred.start_loading = spy\n"
        "import orchestrator.llm.factory as factory\n"
        "factory.start_loading = spy\n"
        "print(preload_sdks(['chatcompletion', 'local', 'openai', 'claude', 'anthropic']))\n"
        "print(preload_sdks(['groq', 'nonsense']))\n"
        "deferred.start_loading('openai', lambda: None).result(timeout=60)\n"
        "deferred.start_loading('anthropic', lambda: None).result(timeout=60)\n"
        "print(order[:2], 'openai' in sys.modules, 'anthropic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['openai', 'anthropic']",
        "['openai']",  # started again by name; the loader imports it once (the same future)
        "['openai', 'anthropic'] True True",
    ]


def test_preload_of_a_team_without_openai_leaves_it_unloaded() -> None:
    code = (
        "import sys\n"
        "from orchestrator.llm import deferred, preload_sdks\n"
        "assert preload_sdks(['claude']) == ['anthropic']\n"
        "deferred.start_loading('anthropic', lambda: None).result(timeout=60)\n"
        "print('anthropic' in sys.modules, 'openai' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True False\n"


async def test_every_sdk_client_shares_one_tls_context_and_keeps_the_timeout() -> None:
    """The CA bundle is parsed once per process, not once per client (0.1 s of CPU each)."""
    from orchestrator.llm.tls import tls_context

    env = {"OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "a"}
    contexts = []
    for kind in ("openai", "chatcompletion", "claude"):
        client = make_model_client(type=kind, model="m", env=env, call_timeout_s=7.0)
        sdk = sdk_of(await built(client))
        contexts.append(sdk._client._transport._pool._ssl_context)
        assert sdk.timeout == 7.0
        assert sdk._client.follow_redirects  # the SDK's default HTTP client, only the context shared
        await client.close()
    assert all(context is tls_context() for context in contexts)
    assert tls_context().verify_mode.name == "CERT_REQUIRED"
    assert tls_context().check_hostname


def test_after_sdk_loads_runs_once_the_imports_started_before_it_are_done() -> None:
    code = (
        "import sys\n"
        "from orchestrator.llm import after_sdk_loads, preload_sdks\n"
        "preload_sdks(['claude'])\n"
        "print(after_sdk_loads(lambda: 'anthropic' in sys.modules).result(timeout=60))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"
