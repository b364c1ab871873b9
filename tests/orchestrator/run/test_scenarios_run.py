"""Whole runs with scripted models: convergence, limits, salvage, faults, control, tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from orchestrator.config.team import PriceConfig
from orchestrator.events import (
    AgentFailed,
    AgentRestarted,
    AnswerSubmitted,
    ConsensusReached,
    RunCancelled,
    RunEvent,
    RunFailed,
    RunFinished,
    TextDelta,
    ToolDecided,
    UsageUpdated,
    VoteCast,
    VoteIgnored,
)
from orchestrator.llm.base import ToolResultMessage, Usage
from orchestrator.ports import RunToolsFactory
from orchestrator.run import RunHandle, start_run
from orchestrator.testing import (
    FakeToolsConfig,
    FakeToolsFactory,
    Request,
    ScriptedModels,
    Turn,
    answer,
    call,
    ended,
    fail,
    hang,
    protocol,
    say,
    scripted_team,
    vote,
)


class Recorder:
    """Collects events and lets a test wait for one that matches."""

    def __init__(self) -> None:
        self.events: list[RunEvent] = []
        self._waiters: list[tuple[Callable[[RunEvent], bool], asyncio.Event]] = []

    def __call__(self, event: RunEvent) -> None:
        self.events.append(event)
        for predicate, flag in self._waiters:
            if predicate(event):
                flag.set()

    async def until(self, predicate: Callable[[RunEvent], bool], count: int = 1) -> None:
        flag = asyncio.Event()
        matches = [e for e in self.events if predicate(e)]
        seen = len(matches)

        def counting(event: RunEvent) -> bool:
            nonlocal seen
            if predicate(event):
                seen += 1
            return seen >= count

        if seen >= count:
            return
        self._waiters.append((counting, flag))
        await asyncio.wait_for(flag.wait(), timeout=5)

    def of(self, kind: type) -> list:  # type: ignore[type-arg]
        return [e for e in self.events if isinstance(e, kind)]


def assert_no_stray_tasks() -> None:
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def run(
    n: int, models: ScriptedModels, *, tools: RunToolsFactory | None = None, **kw: Any
) -> tuple[RunHandle, Recorder]:
    team = scripted_team(n, **kw)
    recorder = Recorder()
    handle = await start_run(team, "fix the flaky test", models=models, tools=tools, subscribers=[recorder])
    return handle, recorder


async def test_three_agents_converge_with_presentation() -> None:
    models = ScriptedModels()
    handle, rec = await run(3, models)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage is None
    assert result.answer == "Final answer: the task is done."
    consensus = rec.of(ConsensusReached)[0]
    assert consensus.winner == result.winner
    assert sum(result.tally.values()) == 3
    assert [e.seq for e in rec.events] == list(range(1, len(rec.events) + 1))
    assert_no_stray_tasks()


@pytest.mark.parametrize("n", [2, 3, 4, 5])
async def test_converged_run_costs_two_n_plus_one_calls(n: int) -> None:
    models = ScriptedModels()
    handle, rec = await run(n, models)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage is None
    assert models.calls == 2 * n + 1
    assert not rec.of(VoteIgnored)
    assert len(rec.of(UsageUpdated)) == models.calls  # every call completed: none wasted
    assert sum(c.cancelled for c in models.clients.values()) == 0


@pytest.mark.parametrize(
    ("strategy", "extra_calls"), [("winner_reuse", 0), ("winner_present", 1), ("synthesize", 1)]
)
async def test_final_answer_strategies(strategy: str, extra_calls: int) -> None:
    models = ScriptedModels()
    handle, _ = await run(2, models, final_answer_strategy=strategy)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert models.calls == 4 + extra_calls
    if strategy == "winner_reuse":
        assert result.answer.startswith("An answer to the task")
    if strategy == "synthesize":
        final_prompt = models.clients[result.winner or ""].requests[-1].messages[0]
        assert final_prompt.text.count("<answer agent=") == 2  # type: ignore[union-attr]


async def test_tie_goes_to_the_earliest_submitted_answer() -> None:
    gate = asyncio.Event()
    # a0 answers after a1; each votes for itself: 1-1, a1's answer is older, so a1 wins.
    models = ScriptedModels(
        {
            "a0": [Turn(gate=gate, calls=answer("A").calls), vote("agent1")],
            "a1": [answer("B"), vote("agent2")],
        }
    )
    handle, rec = await run(2, models, final_answer_strategy="winner_reuse")
    await rec.until(lambda e: isinstance(e, AnswerSubmitted) and e.agent_id == "a1")
    gate.set()
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.winner == "a1"
    assert result.answer == "B"
    assert result.tally == {"a0": 1, "a1": 1}
    assert "earliest" in (rec.of(ConsensusReached)[0].tie_break or "")


async def test_vote_without_seeing_latest_answer_is_ignored() -> None:
    gate = asyncio.Event()
    models = ScriptedModels(
        {
            "a0": [answer("A"), Turn(gate=gate, calls=vote("agent2").calls)],
            "a1": [answer("B"), answer("B, improved")],
        }
    )
    handle, rec = await run(3, models, final_answer_strategy="winner_reuse")
    await rec.until(lambda e: isinstance(e, AnswerSubmitted) and e.label == "agent2.2")
    gate.set()
    result = await ended(handle)
    ignored = rec.of(VoteIgnored)
    assert [(e.agent_id, e.voted_for) for e in ignored] == [("a0", "a1")]
    assert "agent2.2" in ignored[0].reason
    restarts = [(e.agent_id, e.reason, e.new_answers) for e in rec.of(AgentRestarted)]
    assert restarts == [("a0", "vote ignored", ("agent2.2",))]
    assert isinstance(result, RunFinished)
    assert result.salvage is None
    counted = [e for e in rec.of(VoteCast) if e.seq > rec.of(AnswerSubmitted)[-1].seq]
    assert sum(result.tally.values()) == len(counted) == 3


async def test_answer_cap_makes_an_agent_vote_only() -> None:
    models = ScriptedModels({"a0": [answer("A"), answer("A again")]})
    handle, rec = await run(2, models, max_new_answers_per_agent=1, final_answer_strategy="winner_reuse")
    result = await ended(handle)
    second = models.clients["a0"].requests[1]
    assert "new_answer" not in second.tool_names
    assert "vote" in second.tool_names
    assert "used all your answers" in second.system
    assert [e.label for e in rec.of(AnswerSubmitted) if e.agent_id == "a0"] == ["agent1.1"]
    assert isinstance(result, RunFinished)
    assert result.salvage is None


def always_answer(request: Request) -> Turn:
    return answer(f"answer #{len(request.messages)}") if "new_answer" in request.tool_names else say("x")


async def test_max_rounds_salvages_the_latest_answer() -> None:
    models = ScriptedModels(then=always_answer)
    handle, rec = await run(2, models, max_rounds=2, max_new_answers_per_agent=None)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage == "max_rounds:latest_answer"
    assert result.answer == rec.of(AnswerSubmitted)[-1].content
    assert len(rec.of(AnswerSubmitted)) == 4
    assert_no_stray_tasks()


async def test_timeout_salvages_while_a_peer_hangs() -> None:
    models = ScriptedModels({"a1": [hang()]})
    handle, _ = await run(2, models, timeout_seconds=0.3)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage == "timeout:latest_answer"
    assert result.winner == "a0"
    assert models.clients["a1"].cancelled == 1
    assert_no_stray_tasks()


async def test_timeout_without_answers_fails() -> None:
    handle, _ = await run(2, ScriptedModels({"a0": [hang()], "a1": [hang()]}), timeout_seconds=0.2)
    result = await ended(handle)
    assert isinstance(result, RunFailed)
    assert result.reasons["run"] == "timeout before any answer"


async def test_budget_cap_salvages_and_starts_no_further_call() -> None:
    team_kw: dict[str, Any] = {"budget_usd": 0.0001}
    models = ScriptedModels()
    team = scripted_team(3, **team_kw)
    team = team.model_copy(update={"prices": {}})  # "scripted" is unknown: the conservative default price
    rec = Recorder()
    handle = await start_run(team, "task", models=models, subscribers=[rec])
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage == "budget:latest_answer"
    usage = rec.of(UsageUpdated)
    # The three first answers were in flight together and the first to finish crossed the cap:
    # they complete (and count), but no vote call starts after it.
    assert usage[0].run_cost_usd >= 0.0001
    assert models.calls == len(usage) == 3
    assert all("new_answer" in c.requests[-1].tool_names for c in models.clients.values())
    assert result.cost_usd == usage[-1].run_cost_usd


async def test_budget_reached_mid_run_stops_before_the_next_call() -> None:
    # Free answers, then a priced vote crosses the cap: nobody starts another call after it.
    team = scripted_team(3, budget_usd=0.001, max_new_answers_per_agent=1)
    gate = asyncio.Event()
    costly = Turn(calls=vote("agent2").calls, usage=Usage(input_tokens=10_000_000), gate=gate)
    models = ScriptedModels({"a0": [answer("A"), costly]})
    prices = {
        "scripted": PriceConfig(input_per_mtok=0.0, output_per_mtok=0.0),
        "costly": PriceConfig(input_per_mtok=1, output_per_mtok=0),
    }
    team = team.model_copy(
        update={
            "prices": prices,
            "agents": [
                team.agents[0].model_copy(
                    update={"backend": team.agents[0].backend.model_copy(update={"model": "costly"})}
                ),
                *team.agents[1:],
            ],
        }
    )
    rec = Recorder()
    handle = await start_run(team, "task", models=models, subscribers=[rec])
    await rec.until(lambda e: isinstance(e, AnswerSubmitted), count=3)
    gate.set()
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage is not None
    assert result.salvage.startswith("budget:")
    crossing = next(e for e in rec.of(UsageUpdated) if e.run_cost_usd >= 0.001)
    assert crossing.agent_id == "a0"
    started_after = [
        e for e in rec.events if e.seq > crossing.seq and getattr(e, "status", None) == "thinking"
    ]
    assert started_after == []
    assert models.calls == 6  # answers and votes; the winner's presentation call never started


async def test_failing_agent_is_dropped_and_run_goes_on() -> None:
    models = ScriptedModels({"a1": [fail("HTTP 500 after 4 attempts")]})
    handle, rec = await run(3, models)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage is None
    failed = rec.of(AgentFailed)
    assert [e.agent_id for e in failed] == ["a1"]
    assert "HTTP 500" in failed[0].reason
    assert "a1" not in result.tally
    assert result.winner != "a1"
    assert sum(result.tally.values()) == 2


async def test_all_agents_failing_fails_the_run_with_reasons() -> None:
    models = ScriptedModels({"a0": [fail("quota")], "a1": [fail("bad key")]})
    handle, _ = await run(2, models)
    result = await ended(handle)
    assert isinstance(result, RunFailed)
    assert "quota" in result.reasons["a0"]
    assert "bad key" in result.reasons["a1"]


async def test_model_client_construction_failure_drops_the_agent() -> None:
    inner = ScriptedModels()

    def models(agent):  # type: ignore[no-untyped-def]
        if agent.id == "a0":
            raise ValueError("OPENAI_API_KEY is not set")
        return inner(agent)

    team = scripted_team(2)
    handle = await start_run(team, "task", models=models)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.winner == "a1"


async def test_cancel_stops_everything() -> None:
    models = ScriptedModels({f"a{i}": [hang()] for i in range(3)})
    handle, rec = await run(3, models)
    await rec.until(lambda e: getattr(e, "status", None) == "thinking", count=3)
    await handle.cancel(by="U123")
    result = await ended(handle)
    assert isinstance(result, RunCancelled)
    assert result.by == "U123"
    assert sum(c.cancelled for c in models.clients.values()) == 3
    assert rec.events[-1] == result
    assert_no_stray_tasks()


async def test_cancel_right_after_start() -> None:
    handle, _ = await run(2, ScriptedModels())
    await handle.cancel()
    assert isinstance(await ended(handle), RunCancelled)
    assert_no_stray_tasks()


async def test_finish_now_salvages_immediately() -> None:
    models = ScriptedModels({"a1": [hang()], "a2": [hang()]})
    handle, rec = await run(3, models)
    await rec.until(lambda e: isinstance(e, AnswerSubmitted))
    await handle.finish_now(by="U9")
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage == "finish_now:latest_answer"
    assert result.winner == "a0"
    assert_no_stray_tasks()


async def test_new_answers_are_injected_into_an_answered_agents_tool_result() -> None:
    gate = asyncio.Event()
    tools = FakeToolsFactory()
    models = ScriptedModels(
        {
            "a0": [answer("A"), Turn(gate=gate, calls=(call("shell", command="make test"),))],
            "a1": [answer("B"), answer("B, improved")],
        }
    )
    handle, rec = await run(2, models, tools=tools, final_answer_strategy="winner_reuse")
    await rec.until(lambda e: isinstance(e, AnswerSubmitted) and e.label == "agent2.2")
    gate.set()
    result = await ended(handle)
    injected = rec.of(AgentRestarted)
    assert [(e.agent_id, e.new_answers) for e in injected] == [("a0", ("agent2.2",))]
    tool_result = models.clients["a0"].requests[2].messages[-1]
    assert isinstance(tool_result, ToolResultMessage)
    assert '<answer agent="agent2" label="agent2.2">' in tool_result.content
    assert not rec.of(VoteIgnored)  # a0 voted having seen agent2.2 through the injection
    assert isinstance(result, RunFinished)
    assert result.salvage is None


async def test_denied_tool_call_is_fed_back_to_the_model() -> None:
    tools = FakeToolsFactory(FakeToolsConfig(deny=frozenset({"shell"})))
    models = ScriptedModels({"a0": [Turn(calls=(call("shell", command="rm -rf /"),)), answer("A")]})
    handle, rec = await run(2, models, tools=tools)
    result = await ended(handle)
    fed_back = models.clients["a0"].requests[1].messages[-1]
    assert isinstance(fed_back, ToolResultMessage)
    assert fed_back.is_error
    assert "Denied" in fed_back.content
    assert [e.decision for e in rec.of(ToolDecided)] == ["deny"]
    assert isinstance(result, RunFinished)
    assert tools.built is not None
    assert tools.built.executions == []


def publisher(request: Request) -> Turn:
    """Tries to publish in every phase: once while coordinating, once when presenting."""
    published = any(isinstance(m, ToolResultMessage) and m.name == "publish" for m in request.messages)
    if not published:
        return Turn(calls=(call("publish", message="release notes"),))
    return protocol(request)


async def test_side_effect_runs_once_by_the_winner() -> None:
    tools = FakeToolsFactory()
    handle, rec = await run(3, ScriptedModels(then=publisher), tools=tools)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage is None
    assert tools.built is not None
    assert [(x.agent_id, x.phase) for x in tools.built.executions] == [(result.winner, "final")]
    deferred = [e for e in rec.of(ToolDecided) if not e.executed]
    assert len(deferred) == 3  # each agent's coordination-phase publish was deferred


async def test_the_winners_final_prompt_lists_exactly_the_actions_it_deferred() -> None:
    def publish_once(request: Request) -> Turn:
        published = any(isinstance(m, ToolResultMessage) and m.name == "publish" for m in request.messages)
        presenting = "vote" not in request.tool_names
        if not published and not presenting:  # only while coordinating
            return Turn(calls=(call("publish", message="release notes"),))
        return protocol(request)

    tools = FakeToolsFactory()
    models = ScriptedModels(then=publish_once)
    handle, _ = await run(3, models, tools=tools)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    winner = models.clients[result.winner or ""]
    prompt = str(winner.requests[-1].messages[0].text)  # type: ignore[union-attr]
    assert "these actions of yours were deferred" in prompt
    assert '- publish {"message": "release notes"}' in prompt
    assert prompt.count("- publish ") == 1  # its own deferred call (the others' are not its to do)


async def test_a_winner_that_deferred_nothing_gets_no_deferred_list() -> None:
    models = ScriptedModels()
    handle, _ = await run(2, models)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    prompt = str(models.clients[result.winner or ""].requests[-1].messages[0].text)  # type: ignore[union-attr]
    assert "deferred" not in prompt


async def test_agent_without_workflow_calls_is_reminded_then_dropped() -> None:
    models = ScriptedModels({"a1": [say("thinking"), say("still thinking"), say("hmm")]})
    handle, rec = await run(3, models)
    result = await ended(handle)
    failed = rec.of(AgentFailed)
    assert [e.agent_id for e in failed] == ["a1"]
    assert "without calling new_answer or vote" in failed[0].reason
    assert len(models.clients["a1"].requests) == 3  # first try + 2 reminders
    reminder = models.clients["a1"].requests[1].messages[-1]
    assert "workflow tool call" in reminder.text  # type: ignore[union-attr]
    assert isinstance(result, RunFinished)
    assert result.salvage is None


async def test_invalid_vote_target_is_refused_and_retried() -> None:
    models = ScriptedModels({"a0": [answer("A"), vote("agent9")]})
    handle, _ = await run(2, models, final_answer_strategy="winner_reuse")
    result = await ended(handle)
    retry = models.clients["a0"].requests[2].messages[-1]
    assert isinstance(retry, ToolResultMessage)
    assert retry.is_error
    assert "agent9" in retry.content
    assert isinstance(result, RunFinished)
    assert result.salvage is None


async def test_text_deltas_are_coalesced() -> None:
    long_text = "word " * 400  # 125 chunks from the scripted stream
    models = ScriptedModels({"a0": [Turn(text=long_text, calls=answer("A").calls)]})
    handle, rec = await run(2, models)
    await ended(handle)
    deltas = [e for e in rec.of(TextDelta) if e.agent_id == "a0"]
    assert "".join(e.text for e in deltas) == long_text
    assert len(deltas) <= 3


async def test_events_stream_ends_with_terminal_event() -> None:
    handle, _ = await run(2, ScriptedModels())
    kinds = [event.kind async for event in handle.events()]
    assert kinds[-1] == "finished"
    assert isinstance(await ended(handle), RunFinished)


async def test_no_wasted_calls_when_agents_have_different_latencies() -> None:
    delays = {"a0": 0.001, "a1": 0.02, "a2": 0.04}

    def slow(agent_id: str) -> Callable[[Request], Turn]:
        def script(request: Request) -> Turn:
            turn = protocol(request)
            return Turn(text=turn.text, calls=turn.calls, delay=delays[agent_id])

        return script

    models = ScriptedModels({a: [slow(a)] * 3 for a in delays})
    handle, rec = await run(3, models)
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    assert result.salvage is None
    assert models.calls == 7
    assert not rec.of(VoteIgnored)


def hangs_when_presenting(request: Request) -> Turn:
    return hang() if not request.tool_names & {"new_answer", "vote"} else protocol(request)


@pytest.mark.parametrize("how", ["cancel", "finish_now"])
async def test_stop_during_the_final_presentation(how: str) -> None:
    models = ScriptedModels(then=hangs_when_presenting)
    handle, rec = await run(3, models)
    await rec.until(lambda e: getattr(e, "status", None) == "presenting")
    await (handle.cancel(by="U1") if how == "cancel" else handle.finish_now(by="U1"))
    result = await ended(handle)
    consensus = rec.of(ConsensusReached)[0]
    if how == "cancel":
        assert isinstance(result, RunCancelled)
    else:
        assert isinstance(result, RunFinished)
        assert result.salvage == "finish_now:most_voted"
        assert result.winner == consensus.winner
        assert result.answer == next(
            e.content for e in rec.of(AnswerSubmitted) if e.agent_id == consensus.winner
        )
    assert sum(c.cancelled for c in models.clients.values()) == 1  # the presentation call
    assert_no_stray_tasks()


async def test_prompts_carry_context_system_message_and_anonymised_answers() -> None:
    team = scripted_team(2, final_answer_strategy="winner_reuse")
    first = team.agents[0].model_copy(update={"system_message": "You review billing code."})
    team = team.model_copy(update={"agents": [first, team.agents[1]]})
    models = ScriptedModels()
    handle = await start_run(team, "fix it", models=models, context="Earlier answer: restart the worker.")
    await ended(handle)
    opening = models.clients["a0"].requests[0]
    assert "You review billing code." in opening.system
    assert "You are agent1" in opening.system
    assert "<context>\nEarlier answer: restart the worker.\n</context>" in opening.messages[0].text  # type: ignore[union-attr]
    # a0's second turn: the latest answers, anonymised, its own last, no real ids anywhere.
    update = models.clients["a0"].requests[1].messages[-1]
    assert isinstance(update, ToolResultMessage)
    assert update.content.index('agent="agent2"') < update.content.index('agent="agent1"')
    assert "a1" not in update.content.replace("agent1", "").replace("agent2", "")


async def test_agent_repeating_invalid_workflow_calls_is_dropped() -> None:
    models = ScriptedModels({"a1": [answer("B"), vote("agent9"), vote("agent9"), vote("agent9")]})
    handle, rec = await run(3, models)
    result = await ended(handle)
    failed = rec.of(AgentFailed)
    assert [e.agent_id for e in failed] == ["a1"]
    assert "invalid vote call" in failed[0].reason
    assert len(models.clients["a1"].requests) == 4
    assert isinstance(result, RunFinished)
    assert result.salvage is None
