"""Build a `ModelClient` from a backend type, model and connection settings.

SDKs are imported inside the branch that needs them: a team using only Anthropic never pays for
importing `openai`, which keeps CLI start-up short.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from orchestrator.config.presets import PRESETS
from orchestrator.errors import ProviderConfigError
from orchestrator.llm.adapter import DEFAULT_CALL_TIMEOUT_S, DEFAULT_IDLE_TIMEOUT_S
from orchestrator.llm.retry import RetryPolicy
from orchestrator.ports import ModelClient

BACKEND_TYPES = ("openai", "claude", "anthropic", "chatcompletion", *PRESETS)
# Local servers ignore the key, but the SDKs refuse to build a client without one.
PLACEHOLDER_API_KEY = "not-needed"
_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


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
) -> ModelClient:
    """A client for `type`: `openai` (Responses), `claude`/`anthropic` (Messages), `chatcompletion`
    or a preset name from `PRESETS` (Chat Completions at the preset's URL).

    `base_url`/`api_key` default to the SDKs' variables (`OPENAI_BASE_URL`, `OPENAI_API_KEY`,
    `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`; a preset's own key variable, or `api_key_env`).
    A model call, its retries included, must end within `call_timeout_s`, and never wait
    `idle_timeout_s` for headers or the next event (`adapter.Deadline`); `max_attempts` counts the
    first attempt. Raises `ProviderConfigError` for an
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
    }
    if type in ("claude", "anthropic"):
        url = base_url or environ.get("ANTHROPIC_BASE_URL") or None
        key = resolve_api_key(api_key, api_key_env or "ANTHROPIC_API_KEY", url is not None, environ)
        from orchestrator.llm.anthropic import AnthropicClient
        from orchestrator.llm.anthropic import build_sdk_client as build_anthropic

        return AnthropicClient(build_anthropic(url, key, call_timeout_s), model, **settings)
    if type in ("openai", "chatcompletion") or type in PRESETS:
        if type in PRESETS:
            preset_url, preset_env = PRESETS[type]
            url = base_url or preset_url
            key_env = api_key_env or preset_env
            keyless_ok = base_url is not None or preset_env is None
        else:
            url = base_url or environ.get("OPENAI_BASE_URL") or None
            key_env = api_key_env or "OPENAI_API_KEY"
            keyless_ok = url is not None
        key = resolve_api_key(api_key, key_env, keyless_ok, environ)
        from orchestrator.llm.openai import ChatCompletionsClient, OpenAIResponsesClient
        from orchestrator.llm.openai import build_sdk_client as build_openai

        cls = OpenAIResponsesClient if type == "openai" else ChatCompletionsClient
        return cls(build_openai(url, key, call_timeout_s), model, **settings)
    raise ProviderConfigError(f"unknown backend type {type!r}; expected one of {', '.join(BACKEND_TYPES)}")
