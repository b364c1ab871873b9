"""A broken provider in a real run (the real SDKs, the loopback server): retried, then dropped with a
reason while the other agents finish the run. Timeouts come from the team's backend settings."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import AgentConfig, BackendConfig, OrchestratorConfig, TeamConfig, parse_team
from orchestrator.errors import TeamConfigError
from orchestrator.events import AgentFailed, RunEvent
from orchestrator.run import start_run
from orchestrator.testing import ended
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

AGENTS = {  # agent id -> (backend type, model, provider name in errors)
    "alpha": ("openai", "gpt-4o-mini", "openai"),
    "beta": ("claude", "claude-sonnet-4-6", "anthropic"),
    "gamma": ("chatcompletion", "llama3", "chatcompletion"),
}
IDLE = 0.2  # the broken agent's short limits keep the tests fast; the run timeout is far above them
CALL = 5.0  # a call's budget, retries included: here above two idle cuts and a backoff
HEALTHY = {"call_timeout_seconds": 30.0, "idle_timeout_seconds": 5.0}  # generous on a loaded machine
BROKEN = {"call_timeout_seconds": CALL, "idle_timeout_seconds": IDLE}


def team_for(server: ProviderServer, **limits: dict[str, float]) -> TeamConfig:
    """The three agents, healthy limits; `limits[agent_id]` overrides that agent's backend settings."""

    def agent(agent_id: str) -> AgentConfig:
        kind, model, _ = AGENTS[agent_id]
        url = server.anthropic_base_url if kind == "claude" else server.openai_base_url
        settings: dict[str, Any] = HEALTHY | limits.get(agent_id, {})
        backend = BackendConfig(
            type=kind,  # type: ignore[arg-type]
            model=model,
            base_url=url,
            api_key="test-key",  # type: ignore[arg-type]
            max_attempts=2,
            **settings,
        )
        return AgentConfig(id=agent_id, backend=backend)

    return TeamConfig(agents=[agent(a) for a in AGENTS], orchestrator=OrchestratorConfig(timeout_seconds=60))


def faulty(model: str, fault: dict[str, Any], times: int | None = None) -> Any:
    """The protocol agent, except that `model`'s replies carry `fault` (the first `times` ones, or all)."""
    seen = {"n": 0}

    def handler(request: ProviderRequest) -> Reply:
        reply = protocol_agent(request)
        if request.model != model or (times is not None and seen["n"] >= times):
            return reply
        seen["n"] += 1
        return dataclasses.replace(reply, **fault)

    return handler


# (agent, fault, words of the reason): each SDK meets at least two faults.
FAULTS = [
    ("gamma", {"cut": True}, "stream ended without a finish_reason"),
    ("beta", {"cut": True}, "stream ended before message_stop"),
    ("gamma", {"malformed": "html"}, "stream ended without a finish_reason"),
    ("alpha", {"malformed": "data"}, "malformed response: data is not JSON"),
    ("alpha", {"hang_before_headers": True}, f"no data for {IDLE:g} s (idle_timeout_seconds)"),
    ("beta", {"hang": True}, f"no data for {IDLE:g} s (idle_timeout_seconds)"),
    ("gamma", {"keepalive": 0.05}, "the call took over 0.5 s (call_timeout_seconds)"),
]
HANGS = {"hang", "hang_before_headers"}
HEALTHY_IDLE = HEALTHY["idle_timeout_seconds"]
# Keep-alives are not events, so they would trip the idle limit first: lift it to reach the call one.
LIMITS = {"keepalive": {"idle_timeout_seconds": 5.0, "call_timeout_seconds": 0.5}}


@pytest.mark.parametrize(("agent_id", "fault", "words"), FAULTS, ids=lambda v: str(v))
async def test_a_persistently_broken_provider_is_dropped_and_the_run_finishes(
    agent_id: str, fault: dict[str, Any], words: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, model, provider = AGENTS[agent_id]
    caplog.set_level(logging.WARNING, logger="orchestrator.run")
    async with ProviderServer(faulty(model, fault)) as server:
        events: list[RunEvent] = []
        started = time.monotonic()
        kind = next(iter(fault))
        # The short idle limit only where a hang is injected: on a loaded machine it could cut
        # another fault's first attempt before the server saw it.
        broken = (
            BROKEN if kind in HANGS else BROKEN | {"idle_timeout_seconds": HEALTHY["idle_timeout_seconds"]}
        )
        team = team_for(server, **{agent_id: broken | LIMITS.get(kind, {})})
        handle = await start_run(team, "fix the flaky test", subscribers=[events.append])
        result = await asyncio.wait_for(ended(handle), timeout=30)
        elapsed = time.monotonic() - started
        attempts = [r for r in server.requests if r.model == model]
    failed = [e for e in events if isinstance(e, AgentFailed)]
    assert [e.agent_id for e in failed] == [agent_id]
    reason = failed[0].reason
    assert f"{provider} {model}" in reason  # names the backend...
    assert words in reason  # ...and the cause
    if "keepalive" in fault:  # one attempt used the whole call deadline: no retry may start past it
        assert len(attempts) == 1
    else:
        assert reason.endswith("(after 2 attempts)")
        assert len(attempts) == 2  # retried once (max_attempts: 2), then given up
    assert any(agent_id in r.getMessage() and words in r.getMessage() for r in caplog.records)
    assert result.kind == "finished", result
    assert result.salvage is None
    assert result.winner in set(AGENTS) - {agent_id}
    assert result.answer.startswith("Final answer:")
    assert elapsed < 15  # nowhere near the run timeout
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_transient_faults_are_retried_and_every_agent_converges() -> None:
    def handler(request: ProviderRequest) -> Reply:
        reply = protocol_agent(request)
        first = sum(r.model == request.model for r in server.requests) == 1
        faults: dict[str, dict[str, Any]] = {
            "gpt-4o-mini": {"hang_before_headers": True},
            "claude-sonnet-4-6": {"malformed": "data"},
        }
        return dataclasses.replace(reply, **faults.get(request.model, {"cut": True})) if first else reply

    async with ProviderServer(handler) as server:
        events: list[RunEvent] = []
        team = team_for(server, alpha=BROKEN)  # only the hang needs a short idle limit
        handle = await start_run(team, "task", subscribers=[events.append])
        result = await asyncio.wait_for(ended(handle), timeout=30)
    assert not [e for e in events if isinstance(e, AgentFailed)]
    assert result.kind == "finished", result
    assert result.salvage is None
    assert len(server.requests) == 7 + 3  # 3 answers, 3 votes, 1 presentation, 3 retries


def test_backend_timeouts_are_team_settings_with_defaults(tmp_path: Path) -> None:
    text = """
agents:
  - id: a
    backend: {type: groq, model: m, call_timeout_seconds: 60, idle_timeout_seconds: 10, max_attempts: 2}
  - id: b
    backend: {type: claude, model: m}
"""
    team = parse_team(text, base_dir=tmp_path)
    a, b = (agent.backend for agent in team.agents)
    assert (a.call_timeout_seconds, a.idle_timeout_seconds, a.max_attempts) == (60, 10, 2)
    assert a.extras == {}  # ours, not passed through to the provider
    assert (b.call_timeout_seconds, b.idle_timeout_seconds, b.max_attempts) == (120, 30, 4)
    assert not [w for w in team.warnings if "passed through" in w]
    with pytest.raises(TeamConfigError, match="idle_timeout_seconds"):
        parse_team(text.replace("idle_timeout_seconds: 10", "idle_timeout_seconds: 0"), base_dir=tmp_path)
