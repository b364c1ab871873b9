"""End to end through the real SDKs: a team with one agent per wire type against the loopback server."""

from __future__ import annotations

import asyncio

from orchestrator import start_run
from orchestrator.config.team import AgentConfig, BackendConfig, OrchestratorConfig, TeamConfig
from orchestrator.events import AgentFailed, RunEvent
from orchestrator.testing import ended
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply


def team_for(server: ProviderServer, **orchestrator: object) -> TeamConfig:
    def backend(kind: str, model: str) -> BackendConfig:
        url = server.anthropic_base_url if kind == "claude" else server.openai_base_url
        return BackendConfig(type=kind, model=model, base_url=url, api_key="test-key")  # type: ignore[arg-type]

    return TeamConfig(
        agents=[
            AgentConfig(id="alpha", backend=backend("openai", "gpt-4o-mini")),
            AgentConfig(id="beta", backend=backend("claude", "claude-sonnet-4-6")),
            AgentConfig(id="gamma", backend=backend("chatcompletion", "llama3")),
        ],
        orchestrator=OrchestratorConfig(**orchestrator),  # type: ignore[arg-type]
    )


async def test_three_sdks_converge() -> None:
    async with ProviderServer() as server:
        events: list[RunEvent] = []
        handle = await start_run(
            team_for(server), "fix the flaky test in billing", subscribers=[events.append]
        )
        result = await asyncio.wait_for(ended(handle), timeout=20)
    assert result.kind == "finished", result
    assert result.salvage is None
    assert result.answer.startswith("Final answer:")
    assert len(server.requests) == 7  # 3 answers, 3 votes, 1 presentation
    assert {r.api for r in server.requests} == {"responses", "messages", "chat"}
    usage = [e for e in events if e.kind == "usage"]
    assert len(usage) == 7
    assert result.input_tokens == server.prompt_tokens_total > 0
    assert result.cost_usd > 0
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_failing_provider_is_dropped_and_the_rest_converge() -> None:
    def handler(request: ProviderRequest) -> Reply:
        if request.model == "claude-sonnet-4-6":
            return Reply(error=400)  # not retryable: the adapter gives up at once
        return protocol_agent(request)

    async with ProviderServer(handler) as server:
        events: list[RunEvent] = []
        handle = await start_run(team_for(server), "task", subscribers=[events.append])
        result = await asyncio.wait_for(ended(handle), timeout=20)
    failed = [e for e in events if isinstance(e, AgentFailed)]
    assert [e.agent_id for e in failed] == ["beta"]
    assert "400" in failed[0].reason
    assert result.kind == "finished"
    assert result.winner in {"alpha", "gamma"}
