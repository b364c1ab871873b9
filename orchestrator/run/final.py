"""The final answer: how the winner writes it (strategies) and what a run ends with when it cannot converge.

Strategies (`orchestrator.final_answer_strategy`):
- `winner_reuse`: no extra call; the winning answer is the final answer.
- `winner_present` (default): one call by the winner with its final-phase tools (deferred side effects
  such as push/publish run here, once: the prompt lists the winner's deferred calls, so it performs
  exactly those), streaming `FinalDelta`; it sees only its own answer and the voters' reasons, which
  keeps the prompt short.
- `synthesize`: the winner sees every current answer and merges them.
Salvage (timeout, budget, finish-now, max_rounds) never calls a model: it takes the most-voted answer,
else the latest one, and labels the result `"<why>:<most_voted|latest_answer>"` in `RunFinished.salvage`.
Apply-back (`workspace.apply: ask`): once the answer stands, the winner's patch is written to the source
through the permission gate; the outcome lands in `RunFinished.applied`/`apply_reason`, never in the
run's outcome. On a run bound to a repository (`workspace.repository`) the same step publishes
instead: one approval bound to the diff, then one commit on `massgen/<run>`, one push and one pull
request, by trusted code (`orchestrator.repos`); the result is `RunFinished.pull_request`. Agents
never push themselves there (a deny rule), so the final phase's deferred push is this step.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace

from orchestrator.config.team import FinalAnswerStrategy, TeamConfig
from orchestrator.errors import ToolParked
from orchestrator.events import AgentStatus, ConsensusReached, RunFailed, RunFinished, ToolAwaiting
from orchestrator.llm.base import AssistantMessage, Message, ToolResultMessage, UserMessage
from orchestrator.ports import Finisher, ToolOutcome
from orchestrator.run import prompts
from orchestrator.run.agent import AgentSession, BudgetReached
from orchestrator.run.coordination import Choice, CoordinationState

log = logging.getLogger(__name__)


async def conclude(run: Finisher) -> RunFinished:
    """Consensus: announce the winner, let it present (per strategy), attach its patch."""
    choice = run.state.leader()
    assert choice is not None  # converged implies votes for an agent with an answer
    if run.state.phase == "coordinating":  # a resumed run may have announced it already
        tally = run.state.tally()
        run.emit(
            ConsensusReached(
                winner=choice.agent_id, winner_label=choice.label, tally=tally, tie_break=choice.tie_break
            )
        )
    answer, why = await _final_answer(run, choice)
    return await finished(run, choice, answer, why)


async def salvage(run: Finisher, why: str) -> RunFinished | RunFailed:
    """End without consensus and without a model call: most voted, else latest answer."""
    choice = run.state.salvage()
    if choice is None:
        reasons = {v.agent_id: v.failed for v in run.state.agents.values() if v.failed}
        return RunFailed(reasons={"run": f"{why} before any answer", **reasons})
    return await finished(run, choice, choice.content, f"{why}:{choice.source}")


async def finished(run: Finisher, choice: Choice, answer: str, salvaged: str | None) -> RunFinished:
    """The terminal event for an answer, with the winner's workspace patch and the run's spend."""
    patch = None
    if run.tools is not None:
        try:
            patch = await run.tools.winner_patch(choice.agent_id)
        except Exception:
            log.exception("run %s: winner patch failed", run.run_id)
    state = run.state
    return RunFinished(
        winner=choice.agent_id,
        answer=answer,
        tally=state.tally(),
        salvage=salvaged,
        patch=patch,
        cost_usd=state.cost_usd,
        input_tokens=state.input_tokens,
        output_tokens=state.output_tokens,
    )


def wants_apply(team: TeamConfig, finished: RunFinished) -> bool:
    """Whether the run should try to write the winner's patch back to the source."""
    workspace = team.workspace
    return (
        workspace.apply == "ask"
        and workspace.source is not None
        and finished.winner is not None
        and bool(finished.patch)
    )


async def apply_back(run: Finisher, finished: RunFinished, awaiting: str | None = None) -> RunFinished:
    """Write the winner's patch to the source through the gate; the result says whether it landed.

    Never raises (cancellation aside, and `ToolParked` once the ask is checkpointed):
    a refusal or a failure is reported, the answer stands. `awaiting` resumes a parked ask.
    """
    if finished.winner is None or not finished.patch:  # nothing to apply (see `wants_apply`)
        return finished
    if run.tools is None:  # fail closed: nothing but the run's gate may write the source
        return replace(finished, applied=False, apply_reason="the run's tools cannot apply a patch")
    try:
        outcome = await run.tools.apply_patch(finished.winner, finished.patch, awaiting=awaiting)
    except ToolParked as parked:
        event = ToolAwaiting(
            agent_id=finished.winner, call_id="apply", request_id=parked.request_id, phase="apply"
        )
        await run.checkpoint(event)
        raise
    except Exception as exc:
        log.exception("run %s: applying the winner's patch failed", run.run_id)
        outcome = ToolOutcome(content=f"apply failed: {type(exc).__name__}: {exc}", is_error=True)
    run.emit(AgentStatus(agent_id=finished.winner, status="done"))
    return replace(
        finished,
        applied=not outcome.is_error,
        apply_reason=outcome.content,
        pull_request=outcome.pull_request,
    )


async def _final_answer(run: Finisher, choice: Choice) -> tuple[str, str | None]:
    strategy = run.team.orchestrator.final_answer_strategy
    session = run.sessions.get(choice.agent_id)
    if strategy == "winner_reuse" or session is None or not run.state.agents[choice.agent_id].live:
        return choice.content, None
    try:
        text = await present(session, run.state, choice, strategy)
    except BudgetReached:
        return run.state.final_text or choice.content, "budget:most_voted"
    except Exception as exc:  # the consensus answer still stands; say the presentation failed
        log.warning("run %s: presentation by %s failed: %r", run.run_id, choice.agent_id, exc)
        return choice.content, "presentation_failed:most_voted"
    return text or choice.content, None


def deferred_calls(messages: Sequence[Message]) -> list[str]:
    """The agent's tool calls deferred during coordination (side effects), each once, in order.

    A deferred call's tool result says so ("deferred: …", from the gate); the call it answers names
    the tool and its arguments, which is what the winner must perform in the final phase.
    """
    calls = {c.id: c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    found: list[str] = []
    for message in messages:
        if not isinstance(message, ToolResultMessage) or not message.content.lower().startswith("deferred"):
            continue
        call = calls.get(message.call_id)
        if call is None:
            continue
        line = f"- {call.name} {json.dumps(dict(call.arguments), sort_keys=True, ensure_ascii=False)}"
        if line not in found:
            found.append(line)
    return found


def final_prompt(
    state: CoordinationState, choice: Choice, strategy: FinalAnswerStrategy, deferred: Sequence[str] = ()
) -> str:
    """The user message of the presentation call (with the winner's deferred actions, if any)."""
    reasons = "; ".join(
        view.vote_reason for view in state.live if view.vote == choice.agent_id and view.vote_reason
    )
    reasons = reasons or "none given"
    winner_label = state.agents[choice.agent_id].label
    task = prompts.render("task", task=state.task)
    if strategy == "synthesize":
        body = prompts.render(
            "synthesize",
            winner_label=choice.label,
            reasons=reasons,
            answers=prompts.answers_block(state, choice.agent_id),
        )
    else:
        own = prompts.render("answer_block", agent=winner_label, label=choice.label, content=choice.content)
        votes = state.tally().get(choice.agent_id, 0)
        body = prompts.render("present", winner_label=choice.label, votes=votes, reasons=reasons, answers=own)
    if deferred:
        body += "\n" + prompts.render("deferred", actions="\n".join(deferred))
    return f"{task}\n{body}"


async def present(
    session: AgentSession, state: CoordinationState, choice: Choice, strategy: FinalAnswerStrategy
) -> str:
    """Run the winner's presentation (tool loop included); returns the streamed final text."""
    host = session.host
    host.emit(AgentStatus(agent_id=session.agent_id, status="presenting"))
    label = state.agents[choice.agent_id].label
    system = prompts.render("present_system", label=label)
    if session.agent.system_message:
        system += "\n\n" + session.agent.system_message.strip()
    specs = session.tool_specs("final")
    resumed = session.final
    if resumed is not None and resumed.messages:  # a resumed run: the presentation as far as it got
        messages = list(resumed.messages)
        steps = resumed.steps
    else:
        deferred = deferred_calls(session.messages)
        messages = [UserMessage(text=final_prompt(state, choice, strategy, deferred))]
        await session.record(messages[0], "final", fresh=True)
        steps = 0
    texts = [m.text for m in messages if isinstance(m, AssistantMessage) and m.text]
    last = messages[-1]
    done = isinstance(last, AssistantMessage) and not last.tool_calls
    if not done:
        await _final_calls(session, messages)
    for _ in range(0 if done else max(0, host.team.orchestrator.max_steps_per_turn - steps)):
        text, calls = await session.call_model(system, messages, specs, final=True)
        if text:
            texts.append(text)
        messages.append(AssistantMessage(text=text, tool_calls=tuple(calls)))
        if not calls:
            break
        await _final_calls(session, messages)
    host.emit(AgentStatus(agent_id=session.agent_id, status="done"))
    return "\n\n".join(texts).strip()


async def _final_calls(session: AgentSession, messages: list[Message]) -> None:
    """Run the calls of the last reply that have no result yet (each result checkpointed)."""
    answered = {m.call_id for m in messages if isinstance(m, ToolResultMessage)}
    last = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    for call in last.tool_calls if last is not None else ():
        if call.id in answered:
            continue
        outcome = await session.resume_tool(call, "final")
        result = ToolResultMessage(
            call_id=call.id, name=call.name, content=outcome.content, is_error=outcome.is_error
        )
        messages.append(result)
        await session.record(result, "final")
