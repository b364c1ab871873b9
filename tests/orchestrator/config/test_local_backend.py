"""`type: local` (the embedded model): config defaults and checks, capability per type, price zero."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from orchestrator import start_run
from orchestrator.config.cost import FREE, resolve_price
from orchestrator.config.team import (
    LOCAL_DEFAULT_MODEL,
    AgentConfig,
    BackendConfig,
    TeamConfig,
    local_team,
    parse_team,
)
from orchestrator.errors import ProviderConfigError, ProviderError, TeamConfigError
from orchestrator.events import RunFinished
from orchestrator.llm import llamacpp
from orchestrator.llm.base import Usage, UserMessage
from orchestrator.llm.factory import make_model_client
from orchestrator.testing import Request, ScriptedModelClient, ScriptedModels, Turn, ended, protocol


def test_local_defaults_to_the_packaged_model_and_json_answers(tmp_path: Path) -> None:
    team = parse_team("agents:\n  - id: a\n    backend: {type: local}\n", base_dir=tmp_path)
    backend = team.agents[0].backend
    assert (backend.type, backend.model, backend.model_path) == ("local", LOCAL_DEFAULT_MODEL, None)
    assert backend.structured  # JSON answers and votes; `tool_calls: true` opts into tools
    assert not backend.tool_calls
    assert backend.max_tokens == 512
    assert (backend.call_timeout_seconds, backend.idle_timeout_seconds) == (600.0, 300.0)
    assert backend.runs_locally
    assert team.warnings == ()  # no "no price for model" warning: it is free


def test_local_keys_and_a_relative_model_path(tmp_path: Path) -> None:
    text = """
agents:
  - id: a
    backend: {type: local, model: tiny, model_path: models/tiny.gguf, n_ctx: 2048, threads: 2,
              max_tokens: 128, tool_calls: false}
"""
    backend = parse_team(text, base_dir=tmp_path).agents[0].backend
    assert backend.model_path == (tmp_path / "models" / "tiny.gguf").resolve()
    assert (backend.model, backend.n_ctx, backend.threads, backend.max_tokens) == ("tiny", 2048, 2, 128)
    assert backend.structured  # declared: JSON answers and votes only, no tools


def test_the_local_team_is_three_free_agents() -> None:
    team = local_team()
    assert [a.id for a in team.agents] == ["local1", "local2", "local3"]
    assert all(a.backend.type == "local" and a.backend.structured for a in team.agents)
    assert team.warnings == ()


def test_other_types_call_tools_unless_told_otherwise() -> None:
    assert BackendConfig(type="openai", model="m").tool_calls
    assert BackendConfig(type="chatcompletion", model="m", tool_calls=False).structured


@pytest.mark.parametrize(
    ("backend", "needle"),
    [
        ("{type: openai, model: m, model_path: x.gguf}", "model_path only apply to backend type local"),
        ("{type: groq, model: m, n_ctx: 2048}", "n_ctx only apply to backend type local"),
        ("{type: claude, model: m, tool_calls: false}", "the claude backend lacks"),
        ("{type: local, n_ctx: 100}", "greater than or equal to 512"),
    ],
)
def test_misplaced_local_keys_are_config_errors(backend: str, needle: str, tmp_path: Path) -> None:
    with pytest.raises(TeamConfigError, match=needle):
        parse_team(f"agents:\n  - id: a\n    backend: {backend}\n", base_dir=tmp_path)


def test_a_local_model_costs_nothing_even_unlisted() -> None:
    assert resolve_price(
        "my-finetune", {}, local=BackendConfig.model_validate({"type": "local"}).runs_locally
    ) == (FREE, True)
    assert BackendConfig(type="chatcompletion", model="llama3", preset="ollama").runs_locally
    assert not BackendConfig(type="chatcompletion", model="llama3").runs_locally


async def test_a_run_on_local_models_spends_zero_dollars() -> None:
    # Without `prices:`; an unpriced model would cost $15/$75 per Mtok and this usage blow the budget.
    team = TeamConfig(
        agents=[
            AgentConfig(id=f"a{i}", backend=BackendConfig.model_validate({"type": "local"})) for i in range(3)
        ]
    )
    big = Usage(input_tokens=50_000, output_tokens=20_000)
    models = ScriptedModels()
    handle = await start_run(team, "task", models=lambda agent: _with_usage(models, agent, big))
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage is None
    assert result.input_tokens == 7 * 50_000
    assert result.cost_usd == 0.0


def _with_usage(models: ScriptedModels, agent: AgentConfig, usage: Usage) -> ScriptedModelClient:
    def script(request: Request) -> Turn:
        turn = protocol(request)
        return Turn(text=turn.text, calls=turn.calls, usage=usage)

    client = ScriptedModelClient(then=script, model=agent.backend.model)
    models.clients[agent.id] = client
    return client


async def test_the_factory_builds_a_lazy_client_on_a_shared_server(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    spec = llamacpp.LocalModel(path=gguf, n_ctx=2048)
    first = make_model_client(type="local", model="m", local=spec)
    second = make_model_client(type="local", model="m", local=spec)
    assert isinstance(first, llamacpp.LlamaCppClient)
    server = llamacpp.acquire(spec)
    assert server.refs == 3  # one server for every client of the same model file and settings
    assert server.load_seconds is None  # nothing loaded until the first model call
    await first.close()
    await second.close()
    llamacpp.release(server)
    again = llamacpp.acquire(spec)
    assert again is not server  # the last release dropped it
    llamacpp.release(again)


def test_a_missing_model_file_is_a_config_error(tmp_path: Path) -> None:
    spec = llamacpp.LocalModel(path=tmp_path / "absent.gguf")
    with pytest.raises(ProviderConfigError, match="is not a file"):
        make_model_client(type="local", model="m", local=spec)


@pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None, reason="the `local` extra is not installed"
)
async def test_a_file_that_is_no_model_fails_the_first_call_cleanly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF and nothing else")
    client = make_model_client(type="local", model="m", local=llamacpp.LocalModel(path=bad))
    with pytest.raises(ProviderError, match="cannot start the local model") as info:
        async for _ in client.stream_turn(system="", messages=[UserMessage(text="hi")], tools=[]):
            pass
    assert not info.value.retryable
    await client.close()
