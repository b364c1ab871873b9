"""Load the prompt templates (`orchestrator/prompts/*.md`) and build what each agent sees."""

from __future__ import annotations

import functools
from importlib import resources
from string import Template

from orchestrator.llm.base import ToolSpec
from orchestrator.run.coordination import CoordinationState

NEW_ANSWER = "new_answer"
VOTE = "vote"
WORKFLOW_TOOLS = frozenset({NEW_ANSWER, VOTE})


@functools.cache
def _template(name: str) -> Template:
    text = resources.files("orchestrator.run").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")
    return Template(text.strip())


def render(name: str, **values: object) -> str:
    """Fill one template; a missing placeholder is a bug and raises KeyError."""
    return _template(name).substitute({k: str(v) for k, v in values.items()})


def system_prompt(label: str, system_message: str | None, *, vote_only: bool) -> str:
    """The coordination system prompt of one agent."""
    parts = [render("system", label=label)]
    if system_message:
        parts.append(system_message.strip())
    if vote_only:
        parts.append(render("vote_only"))
    return "\n\n".join(parts)


def first_message(task: str, context: str | None) -> str:
    """The first user message: the task (and a previous run's answer for a follow-up)."""
    parts = [render("task", task=task)]
    if context:
        parts.append(render("context", context=context))
    parts.append(render("first_turn"))
    return "\n".join(parts)


def answers_block(state: CoordinationState, viewer: str | None) -> str:
    """Every agent's latest answer, anonymised, in label order with the viewer's own answer last."""
    answers = sorted(
        state.latest.values(), key=lambda a: (a.agent_id == viewer, state.agents[a.agent_id].label)
    )
    return "\n".join(
        render("answer_block", agent=state.agents[a.agent_id].label, label=a.label, content=a.content)
        for a in answers
    )


def update_message(state: CoordinationState, viewer: str) -> str:
    """The current answers and what to do with them."""
    return render("update", answers=answers_block(state, viewer))


def workflow_specs(state: CoordinationState, *, may_answer: bool) -> list[ToolSpec]:
    """`new_answer` (unless vote-only) and `vote` (once there is an answer to vote for)."""
    specs = []
    if may_answer:
        specs.append(
            ToolSpec(
                name=NEW_ANSWER,
                description=render("tool_new_answer"),
                parameters={
                    "type": "object",
                    "properties": {"content": {"type": "string", "description": "The full answer."}},
                    "required": ["content"],
                },
            )
        )
    labels = sorted(state.agents[agent_id].label for agent_id in state.latest)
    if labels:
        specs.append(
            ToolSpec(
                name=VOTE,
                description=render("tool_vote"),
                parameters={
                    "type": "object",
                    "properties": {
                        "agent_id": {"type": "string", "enum": labels},
                        "reason": {"type": "string"},
                    },
                    "required": ["agent_id", "reason"],
                },
            )
        )
    return specs
