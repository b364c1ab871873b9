"""The loopback server's default handler: a deterministic agent that follows the MassGen protocol.

Convention (adapt `answer_labels` / `vote_target` / `task_of` if the coordination prompts change):

1. `new_answer` offered and this model has not answered yet → call
   `new_answer(content="Answer from <model>: <task>")`. "Answered" means an earlier `new_answer`
   call in this conversation, or the text `Answer from <model>:` in the current input (for
   engines that rebuild the conversation on restart, as MassGen does).
2. Else `vote` offered → `vote(agent_id=<target>, reason=...)`. The target is the first anonymous
   id in the current input, written either as our prompts do, `<answer agent="agent2" ...>`
   (orchestrator/prompts/answer_block.md), or MassGen-style `<agent2.1>`; restricted to the vote
   tool's `agent_id` enum when it has one. Nothing parsable: the enum's first value, else "agent1".
3. Else (final presentation, no workflow tools) → text `Final answer: <model> presents: <task>`.

Structured output (a JSON Schema in `response_format` or the Responses `text.format`): the same
rules, answered as the JSON object the schema describes (`{"action": "answer", "text": ...}` or
`{"action": "vote", "agent": ..., "reason": ...}`), the vote target taken from the schema's enum.

The current input is the text of every user message and tool result after the last assistant
message (where our engine puts the current answers). `<task>` is the text inside `<task>...</task>`
or `<ORIGINAL MESSAGE>...<END OF ORIGINAL MESSAGE>` in any user message, else the last user
message, collapsed to one line and cut to 80 characters.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.provider_types import ProviderRequest, Reply

_LABEL = re.compile(r'<answer agent="(agent\d+)"|<(agent\d+)(?:\.\d+)?>')
_TASK = re.compile(r"<task>(.*?)</task>|<ORIGINAL MESSAGE>(.*?)<END OF ORIGINAL MESSAGE>", re.S)


def current_input(request: ProviderRequest) -> str:
    """User and tool texts after the last assistant message."""
    tail: list[str] = []
    for message in reversed(request.messages):
        if message.role == "assistant":
            break
        tail.append(message.text)
    return "\n".join(reversed(tail))


def task_of(request: ProviderRequest) -> str:
    """The user's task as one short line."""
    for message in request.messages:
        match = _TASK.search(message.text) if message.role == "user" else None
        if match:
            return _one_line(match.group(1) or match.group(2))
    return _one_line(request.last_user_text())


def _one_line(text: str) -> str:
    return " ".join(text.split())[:80] or "(empty task)"


def answer_text(model: str, task: str) -> str:
    """The deterministic answer a model gives; its prefix marks the model as having answered."""
    return f"Answer from {model}: {task}"


def answer_labels(text: str) -> list[str]:
    """Anonymous agent ids in order of first appearance, e.g. ['agent2', 'agent1']."""
    seen: list[str] = []
    for ours, massgen in _LABEL.findall(text):
        label = ours or massgen
        if label not in seen:
            seen.append(label)
    return seen


def vote_target(request: ProviderRequest) -> str:
    """The agent id to vote for (see module docstring, rule 2)."""
    schema = request.tool_schema("vote") or {}
    enum = ((schema.get("properties") or {}).get("agent_id") or {}).get("enum") or []
    labels = answer_labels(current_input(request))
    allowed = [label for label in labels if label in enum] if enum else labels
    if allowed:
        return str(allowed[0])
    return str(enum[0]) if enum else "agent1"


def has_answered(request: ProviderRequest) -> bool:
    """Whether this model already submitted an answer (rule 1)."""
    for message in request.messages:
        if message.role == "assistant" and any(name == "new_answer" for name, _ in message.tool_calls):
            return True
    return f"Answer from {request.model}:" in current_input(request)


def output_schema(request: ProviderRequest) -> dict[str, Any] | None:
    """The JSON Schema a structured-output request asks for, whichever API carried it."""
    chat = request.raw.get("response_format") or {}
    if chat.get("type") == "json_schema":
        return dict(chat["json_schema"]["schema"])
    responses = (request.raw.get("text") or {}).get("format") or {}
    return dict(responses["schema"]) if responses.get("type") == "json_schema" else None


def structured_agent(request: ProviderRequest, schema: dict[str, Any]) -> Reply:
    """Rules 1-2 as a JSON reply matching `schema` (one object, or `anyOf` answer/vote objects)."""
    variants = {v["properties"]["action"]["enum"][0]: v for v in schema.get("anyOf", [schema])}
    answered = any(m.role == "assistant" and _is_answer(m.text) for m in request.messages)
    if "answer" in variants and not (answered or has_answered(request)):
        text = answer_text(request.model, task_of(request))
        return Reply(text=json.dumps({"action": "answer", "text": text}))
    enum = variants["vote"]["properties"]["agent"]["enum"]
    labels = [label for label in answer_labels(current_input(request)) if label in enum]
    target = labels[0] if labels else enum[0]
    return Reply(
        text=json.dumps({"action": "vote", "agent": target, "reason": f"{target} answers the task."})
    )


def _is_answer(text: str) -> bool:
    try:
        reply = json.loads(text)
    except ValueError:
        return False
    return isinstance(reply, dict) and reply.get("action") == "answer"


def protocol_agent(request: ProviderRequest) -> Reply:
    """Answer once, then vote, then present: enough to drive a whole coordination run."""
    task = task_of(request)
    schema = output_schema(request)
    if schema is not None:
        return structured_agent(request, schema)
    if "new_answer" in request.tools and not has_answered(request):
        return Reply(tool_calls=[("new_answer", {"content": answer_text(request.model, task)})])
    if "vote" in request.tools:
        target = vote_target(request)
        return Reply(tool_calls=[("vote", {"agent_id": target, "reason": f"{target} answers the task."})])
    return Reply(text=f"Final answer: {request.model} presents: {task}")
