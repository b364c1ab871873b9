"""Structured output end to end: the real openai SDK against the loopback server, JSON replies only."""

from __future__ import annotations

import asyncio
import json

from orchestrator import start_run
from orchestrator.config.team import AgentConfig, BackendConfig, OrchestratorConfig, TeamConfig
from orchestrator.events import AgentFailed, RunEvent, VoteCast
from orchestrator.testing import ended
from tests.fakes.provider_agent import output_schema, protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply


def team_for(server: ProviderServer, kinds: tuple[str, ...], **orchestrator: object) -> TeamConfig:
    agents = [
        AgentConfig(
            id=f"a{i}",
            backend=BackendConfig(
                type=kind,  # type: ignore[arg-type]
                model=f"small-{i}",
                base_url=server.openai_base_url,
                api_key="test-key",  # type: ignore[arg-type]
                tool_calls=False,
                max_tokens=256,
            ),
        )
        for i, kind in enumerate(kinds)
    ]
    return TeamConfig(agents=agents, orchestrator=OrchestratorConfig(**orchestrator))  # type: ignore[arg-type]


async def test_three_agents_converge_through_json_schema_output() -> None:
    async with ProviderServer() as server:
        team = team_for(server, ("chatcompletion", "chatcompletion", "openai"))
        handle = await start_run(team, "write a haiku about on-call")
        result = await asyncio.wait_for(ended(handle), timeout=20)
    assert result.kind == "finished", result
    assert result.salvage is None
    assert result.answer.startswith("Final answer:")
    assert len(server.requests) == 7  # 3 answers, 3 votes, 1 presentation: as with tool calls
    coordination = [r for r in server.requests if output_schema(r) is not None]
    assert len(coordination) == 6
    assert all(not r.tools for r in server.requests)
    chat = next(r for r in coordination if r.api == "chat")
    assert chat.raw["response_format"]["json_schema"]["name"] == "workflow_reply"
    responses = next(r for r in coordination if r.api == "responses")
    assert responses.raw["text"]["format"]["type"] == "json_schema"


async def test_invalid_json_is_retried_then_a_valid_reply_counts() -> None:
    broken: set[str] = set()

    def handler(request: ProviderRequest) -> Reply:
        if request.model == "small-0" and output_schema(request) is not None and "small-0" not in broken:
            broken.add("small-0")
            return Reply(text='{"action": "answer", "text": "cut')  # cut off: not JSON
        return protocol_agent(request)

    async with ProviderServer(handler) as server:
        events: list[RunEvent] = []
        team = team_for(server, ("chatcompletion", "chatcompletion"))
        handle = await start_run(team, "task", subscribers=[events.append])
        result = await asyncio.wait_for(ended(handle), timeout=20)
    assert result.kind == "finished", result
    assert result.salvage is None
    assert len(server.requests) == 6  # 2 answers (one retried), 2 votes, 1 presentation
    retry = [r for r in server.requests if r.model == "small-0"][1]
    assert "Your reply was not accepted" in retry.last_user_text()
    assert not [e for e in events if isinstance(e, AgentFailed)]


async def test_an_always_invalid_voter_keeps_its_answer_and_the_run_converges() -> None:
    def handler(request: ProviderRequest) -> Reply:
        schema = output_schema(request)
        if request.model == "small-1" and schema is not None and "anyOf" in json.dumps(schema):
            return Reply(text="I think agent1 is best")  # never JSON once it may vote
        return protocol_agent(request)

    async with ProviderServer(handler) as server:
        events: list[RunEvent] = []
        team = team_for(server, ("chatcompletion", "chatcompletion"), structured_retries=2)
        handle = await start_run(team, "task", subscribers=[events.append])
        result = await asyncio.wait_for(ended(handle), timeout=20)
    assert result.kind == "finished", result
    kept = [e for e in events if isinstance(e, VoteCast) and e.agent_id == "a1"]
    assert [e.voted_for for e in kept] == ["a1"]
    assert kept[0].reason.startswith("salvaged: no valid reply in 3 tries")
