"""The workflow as structured output, for models that cannot call tools (`tool_calls: false`).

Each coordination turn asks for one JSON object matching `reply_schema` (the provider enforces it:
llama.cpp compiles the schema into a grammar); `parse_reply` validates it and returns the same
`new_answer` / `vote` call the tool path gets from the model, so the session applies it the same
way and coordination, votes and convergence do not know which path was taken.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from orchestrator.llm.base import OutputSchema, ToolCall
from orchestrator.run import prompts
from orchestrator.run.coordination import CoordinationState

SCHEMA_NAME = "workflow_reply"
REASON_MAX_CHARS = 200
_JSON_OVERHEAD_TOKENS = 32  # `{"action": "answer", "text": "` and the closing, with room to spare
_ids = itertools.count(1)


class AnswerReply(BaseModel):
    """`{"action": "answer", "text": ...}`: a new answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    action: Literal["answer"]
    text: str = Field(min_length=1)


class VoteReply(BaseModel):
    """`{"action": "vote", "agent": "agent2", "reason": ...}`: a vote for a current answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    action: Literal["vote"]
    agent: str = Field(min_length=1)
    reason: str = ""


_REPLY: TypeAdapter[AnswerReply | VoteReply] = TypeAdapter(
    Annotated[AnswerReply | VoteReply, Field(discriminator="action")]
)


def answer_max_chars(max_tokens: int | None) -> int | None:
    """Longest answer text that still lets the JSON close within `max_tokens` (None: no limit).

    Two characters per token is a pessimistic rate for prose, so the grammar ends the string before
    the token limit would cut the object open (a cut reply is invalid JSON and costs a retry).
    """
    if max_tokens is None:
        return None
    return max(32, 2 * (max_tokens - _JSON_OVERHEAD_TOKENS))


def reply_schema(state: CoordinationState, *, may_answer: bool, max_tokens: int | None) -> OutputSchema:
    """The replies allowed now: an answer (unless vote-only), a vote (once an answer exists)."""
    variants: list[dict[str, Any]] = []
    if may_answer:
        text: dict[str, Any] = {"type": "string", "minLength": 1}
        limit = answer_max_chars(max_tokens)
        if limit is not None:
            text["maxLength"] = limit
        variants.append(_object({"action": {"type": "string", "enum": ["answer"]}, "text": text}))
    labels = sorted(state.agents[agent_id].label for agent_id in state.latest)
    if labels:
        properties = {
            "action": {"type": "string", "enum": ["vote"]},
            "agent": {"type": "string", "enum": labels},
            "reason": {"type": "string", "maxLength": REASON_MAX_CHARS},
        }
        variants.append(_object(properties))
    schema = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return OutputSchema(name=SCHEMA_NAME, schema=schema)


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def parse_reply(text: str) -> ToolCall | str:
    """The workflow call a reply stands for, or why it was refused (shown to the model)."""
    try:
        reply = _REPLY.validate_json(text.strip() or "null")
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the reply"
        return f"it is not a JSON object of the required shape ({where}: {error['msg']})."
    call_id = f"structured_{next(_ids)}"
    if isinstance(reply, AnswerReply):
        arguments: dict[str, str] = {"content": reply.text}
        return ToolCall(id=call_id, name=prompts.NEW_ANSWER, arguments=arguments, raw_arguments=text)
    arguments = {"agent_id": reply.agent, "reason": reply.reason}
    return ToolCall(id=call_id, name=prompts.VOTE, arguments=arguments, raw_arguments=text)


def keep_own_answer(label: str, why: str) -> ToolCall:
    """The salvage vote of an agent with an answer: it keeps its own ("no new answer")."""
    arguments = {"agent_id": label, "reason": f"salvaged: {why}"}
    return ToolCall(id=f"structured_{next(_ids)}", name=prompts.VOTE, arguments=arguments)
