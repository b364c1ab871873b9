"""The workflow through structured output (models without tool calls): schema, parsing, retries, salvage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator import start_run
from orchestrator.config.team import AgentConfig, BackendConfig, OrchestratorConfig, PriceConfig, TeamConfig
from orchestrator.events import AgentFailed, AnswerSubmitted, RunEvent, RunFinished, VoteCast
from orchestrator.llm.base import UserMessage
from orchestrator.run import structured
from orchestrator.run.coordination import AgentView, Answer, CoordinationState
from orchestrator.testing import Request, ScriptedModels, Turn, ended, reply, say


def team(n: int, **orchestrator: Any) -> TeamConfig:
    backend = BackendConfig(type="openai", model="scripted", tool_calls=False, max_tokens=128)
    return TeamConfig(
        agents=[AgentConfig(id=f"a{i}", backend=backend) for i in range(n)],
        orchestrator=OrchestratorConfig(**orchestrator),
        prices={"scripted": PriceConfig(input_per_mtok=0.0, output_per_mtok=0.0)},
    )


async def run(n: int, models: ScriptedModels, **orchestrator: Any) -> tuple[RunFinished, list[RunEvent]]:
    events: list[RunEvent] = []
    handle = await start_run(
        team(n, **orchestrator), "write a haiku", models=models, subscribers=[events.append]
    )
    result = await ended(handle)
    assert isinstance(result, RunFinished), result
    return result, events


def state_with_answer() -> CoordinationState:
    agents = {
        "a0": AgentView(agent_id="a0", label="agent1", answers=1),
        "a1": AgentView(agent_id="a1", label="agent2"),
    }
    latest = {"a0": Answer(agent_id="a0", label="agent1.1", content="x", order=0)}
    return CoordinationState(agents=agents, latest=latest)


# ---- schema and parsing -----------------------------------------------------------------------


def test_first_turn_allows_only_an_answer_bounded_by_max_tokens() -> None:
    state = CoordinationState(agents={"a0": AgentView(agent_id="a0", label="agent1")})
    schema = structured.reply_schema(state, may_answer=True, max_tokens=128).schema
    assert schema["properties"]["action"] == {"type": "string", "enum": ["answer"]}
    assert schema["properties"]["text"]["maxLength"] == structured.answer_max_chars(128) == 192
    assert schema["additionalProperties"] is False


def test_later_turns_offer_answer_or_vote_for_agents_with_answers() -> None:
    schema = structured.reply_schema(state_with_answer(), may_answer=True, max_tokens=None).schema
    answer, vote = schema["anyOf"]
    assert "maxLength" not in answer["properties"]["text"]
    assert vote["properties"]["agent"]["enum"] == ["agent1"]
    vote_only = structured.reply_schema(state_with_answer(), may_answer=False, max_tokens=None).schema
    assert vote_only["properties"]["action"]["enum"] == ["vote"]


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ('{"action": "answer", "text": "a haiku"}', "new_answer", {"content": "a haiku"}),
        (
            '  {"action": "vote", "agent": "agent2", "reason": "best"}\n',
            "vote",
            {"agent_id": "agent2", "reason": "best"},
        ),
        ('{"action": "vote", "agent": "agent2"}', "vote", {"agent_id": "agent2", "reason": ""}),
    ],
)
def test_valid_replies_become_workflow_calls(text: str, name: str, arguments: dict[str, str]) -> None:
    call = structured.parse_reply(text)
    assert not isinstance(call, str)
    assert (call.name, dict(call.arguments)) == (name, arguments)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a haiku about on-call",
        '{"action": "answer", "text": "cut off',
        '{"action": "answer", "text": ""}',
        '{"action": "answer"}',
        '{"action": "shout", "text": "x"}',
        '{"action": "vote", "agent": "agent2", "extra": 1}',
        '["answer", "x"]',
    ],
)
def test_invalid_replies_are_refused_with_a_reason(text: str) -> None:
    error = structured.parse_reply(text)
    assert isinstance(error, str)
    assert error.startswith("it is not a JSON object of the required shape")


# ---- whole runs ---------------------------------------------------------------------------------


async def test_three_agents_converge_with_the_usual_number_of_calls() -> None:
    models = ScriptedModels()
    result, events = await run(3, models)
    assert result.salvage is None
    assert result.answer == "Final answer: the task is done."
    assert models.calls == 7  # 3 answers, 3 votes, 1 presentation: as with tool calls
    assert len([e for e in events if isinstance(e, AnswerSubmitted)]) == 3
    assert len([e for e in events if isinstance(e, VoteCast)]) == 3
    requests = [r for c in models.clients.values() for r in c.requests]
    coordination = [r for r in requests if r.output is not None]
    assert len(coordination) == 6
    assert all(not r.tools for r in requests)  # a model without tool calls is offered no tools
    assert "Reply with exactly one JSON object" in coordination[0].system


async def test_an_invalid_reply_is_retried_then_accepted() -> None:
    models = ScriptedModels({"a0": [say("Sure! Here is a haiku."), reply("answer", text="a haiku")]})
    result, events = await run(2, models)
    assert result.salvage is None
    assert len(models.clients["a0"].requests) == 3  # invalid, answer, vote (a1 answered first: it presents)
    retry = models.clients["a0"].requests[1].messages[-1]
    assert isinstance(retry, UserMessage)
    assert retry.text.startswith("Your reply was not accepted: it is not a JSON object")
    assert not [e for e in events if isinstance(e, AgentFailed)]


async def test_an_invalid_vote_target_is_retried() -> None:
    def vote_for_nobody(request: Request) -> Turn:
        return reply("vote", agent="agent9", reason="?")

    models = ScriptedModels({"a0": [reply("answer", text="mine"), vote_for_nobody]})
    result, events = await run(2, models)
    assert result.salvage is None
    retry = models.clients["a0"].requests[2].messages[-1]
    assert isinstance(retry, UserMessage)
    assert "Invalid agent_id 'agent9'" in retry.text
    votes = [e for e in events if isinstance(e, VoteCast) and e.agent_id == "a0"]
    assert len(votes) == 1
    assert not votes[0].reason.startswith("salvaged")


async def test_an_agent_that_never_replies_validly_before_answering_leaves_the_run() -> None:
    models = ScriptedModels({"a0": [say("no json")] * 3})
    result, events = await run(3, models)
    assert result.salvage is None  # the other two converge
    failed = [e for e in events if isinstance(e, AgentFailed)]
    assert [e.agent_id for e in failed] == ["a0"]
    assert failed[0].reason.startswith("no valid reply in 3 tries (last: it is not a JSON object")
    assert len(models.clients["a0"].requests) == 3  # structured_retries: 2, then the salvage


async def test_an_agent_that_never_votes_validly_keeps_its_own_answer() -> None:
    models = ScriptedModels({"a0": [reply("answer", text="mine"), *[say("{")] * 3]})
    result, events = await run(2, models)
    assert result.salvage is None
    salvaged = [e for e in events if isinstance(e, VoteCast) and e.agent_id == "a0"]
    assert [e.voted_for for e in salvaged] == ["a0"]
    assert salvaged[0].reason.startswith("salvaged: no valid reply in 3 tries")
    assert not [e for e in events if isinstance(e, AgentFailed)]


async def test_when_every_reply_is_invalid_the_run_still_ends() -> None:
    models = ScriptedModels(then=lambda request: say("never json"))
    events: list[RunEvent] = []
    handle = await start_run(
        team(3, structured_retries=1), "task", models=models, subscribers=[events.append]
    )
    result = await ended(handle)
    assert result.kind == "failed"
    assert models.calls == 6  # 3 agents x (1 try + 1 retry), then each leaves the run
    assert all("no valid reply in 2 tries" in reason for reason in result.reasons.values())


def test_reply_helper_is_json() -> None:
    assert json.loads(reply("vote", agent="agent1", reason="ok").text) == {
        "action": "vote",
        "agent": "agent1",
        "reason": "ok",
    }


async def test_each_structured_turn_is_one_fresh_message_so_prompts_stay_bounded() -> None:
    models = ScriptedModels()
    await run(3, models)
    vote_turn = models.clients["a0"].requests[1]
    assert len(vote_turn.messages) == 1  # not the run's history: a small model's context holds one turn
    text = vote_turn.messages[0].text  # type: ignore[union-attr]
    assert text.startswith("<task>\nwrite a haiku\n</task>\nRecorded as agent1.1.")
    assert text.count("<answer agent=") == 3
