"""The final answer: how the winner writes it (strategies) and what a run ends with when it cannot converge.

Strategies (`orchestrator.final_answer_strategy`):
- `winner_reuse`: no extra call; the winning answer is the final answer.
- `winner_present` (default): one call by the winner with its final-phase tools (deferred side effects
  such as push/publish run here, once), streaming `FinalDelta`; it sees only its own answer and the
  voters' reasons, which keeps the prompt short.
- `synthesize`: the winner sees every current answer and merges them.
Salvage (timeout, budget, finish-now, max_rounds) never calls a model: it takes the most-voted answer,
else the latest one, and labels the result `"<why>:<most_voted|latest_answer>"` in `RunFinished.salvage`.
"""

from __future__ import annotations

from orchestrator import prompts
from orchestrator.agent import AgentSession
from orchestrator.config import FinalAnswerStrategy
from orchestrator.coordination import Choice, CoordinationState
from orchestrator.events import AgentStatus
from orchestrator.llm.base import AssistantMessage, Message, ToolResultMessage, UserMessage


def final_prompt(state: CoordinationState, choice: Choice, strategy: FinalAnswerStrategy) -> str:
    """The user message of the presentation call."""
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
    messages: list[Message] = [UserMessage(text=final_prompt(state, choice, strategy))]
    specs = list(session.toolbox.specs("final")) if session.toolbox is not None else []
    texts: list[str] = []
    for _ in range(host.team.orchestrator.max_steps_per_turn):
        text, calls = await session.call_model(system, messages, specs, final=True)
        if text:
            texts.append(text)
        messages.append(AssistantMessage(text=text, tool_calls=tuple(calls)))
        if not calls:
            break
        for call in calls:
            outcome = await session.run_tool(call, "final")
            messages.append(
                ToolResultMessage(
                    call_id=call.id, name=call.name, content=outcome.content, is_error=outcome.is_error
                )
            )
    host.emit(AgentStatus(agent_id=session.agent_id, status="done"))
    return "\n\n".join(texts).strip()
