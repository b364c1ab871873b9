"""Tool calls for a model whose chat template has none: one JSON object, held to a grammar.

A small local model (SmolLM2-135M) has no tool-call format, and llama.cpp's server then ignores
`tools` (it renders the plain chat template and returns text). So the embedded client asks instead
for structured output whose schema is the union of the offered tools: `{"tool": NAME,
"arguments": {...}}` with NAME one of the tools and the arguments that tool's own parameter schema.
llama.cpp compiles the schema into a grammar, so even a 135M model emits a well-formed call of a
real tool; `parse_call` turns it into the `ToolCall` the run's tool loop expects, and the history
(earlier calls and their results) is rewritten as plain user/assistant text the template can show.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.llm.base import (
    AssistantMessage,
    Message,
    OutputSchema,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

SCHEMA_NAME = "tool_call"
REPLY = "reply"  # the pseudo-tool of a plain text reply, offered where text may end the turn
# The run's workflow tools (orchestrator.run.prompts.WORKFLOW_TOOLS, which a test keeps equal): a
# turn that offers one must end in a call, so no text reply is offered there.
TURN_ENDING = frozenset({"new_answer", "vote"})
# The toolbox's tools a small model is offered: fetch_url and search_files lead a 135M model astray
# (it fetches made-up URLs in a loop), and list, read, run and write do the job.
SMALL_TOOLBOX = frozenset({"list_files", "read_file", "run_command", "write_file"})
_JSON_OVERHEAD_TOKENS = 48  # `{"tool": "new_answer", "arguments": {"content": "` and the closing
_PATH_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}$"  # relative, inside the workspace, no spaces
_RESULT_MAX_CHARS = 4000  # of one tool result shown again: a small context holds a turn, not a log


def may_reply(tools: Sequence[ToolSpec]) -> bool:
    """Whether text may end this turn: no workflow tool is offered (the winner's presentation)."""
    return not any(spec.name in TURN_ENDING for spec in tools)


def offered(tools: Sequence[ToolSpec], messages: Sequence[Message]) -> list[ToolSpec]:
    """The tools of this reply: the small toolbox, and before any tool result only its tools.

    Left free, a 135M model answers a question about a file at once, with an invented answer; its
    first reply of a conversation is therefore a real tool call whenever one is offered.
    """
    kept = [spec for spec in tools if spec.name in TURN_ENDING or spec.name in SMALL_TOOLBOX]
    toolbox = [spec for spec in kept if spec.name not in TURN_ENDING]
    looked = any(isinstance(message, ToolResultMessage) for message in messages)
    return kept if looked or not toolbox else toolbox


def call_schema(tools: Sequence[ToolSpec], *, max_tokens: int | None, reply: bool) -> OutputSchema:
    """One object per tool: its name and its arguments (only the ones it needs, plus `path`).

    Optional arguments with defaults are dropped (fewer keys, fewer ways for a small model to go
    wrong); every string gets a length the token budget can close, so a reply is never cut open.
    """
    variants = [_variant(spec, _max_chars(max_tokens)) for spec in with_reply(tools, reply)]
    schema = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return OutputSchema(name=SCHEMA_NAME, schema=schema)


def with_reply(tools: Sequence[ToolSpec], reply: bool) -> list[ToolSpec]:
    """The tools, plus the text reply when `reply` (no workflow tool must end the turn)."""
    if not reply:
        return list(tools)
    text = ToolSpec(
        name=REPLY,
        description="Your reply to the user, in Markdown, when no tool is needed.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )
    return [*tools, text]


def _max_chars(max_tokens: int | None) -> int | None:
    # Two characters per token is pessimistic for prose: the grammar ends the string in time.
    return None if max_tokens is None else max(32, 2 * (max_tokens - _JSON_OVERHEAD_TOKENS))


def _variant(spec: ToolSpec, max_chars: int | None) -> dict[str, Any]:
    params = spec.parameters
    properties: Mapping[str, Any] = params.get("properties", {})
    required = [name for name in properties if name in params.get("required", ())]
    kept = required or [name for name in properties if name == "path"]
    arguments = {
        "type": "object",
        "properties": {name: _bounded(name, properties[name], max_chars) for name in kept},
        "required": kept,
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"tool": {"type": "string", "enum": [spec.name]}, "arguments": arguments},
        "required": ["tool", "arguments"],
        "additionalProperties": False,
    }


def _bounded(name: str, prop: Mapping[str, Any], max_chars: int | None) -> dict[str, Any]:
    bounded = {key: value for key, value in prop.items() if key not in ("title", "default")}
    if name == "path":  # a short relative path: no wandering to `/vendor/...json.json.json`
        return {"type": "string", "pattern": _PATH_PATTERN}
    if bounded.get("type") == "string" and "enum" not in bounded:
        bounded["minLength"] = max(1, int(bounded.get("minLength", 1)))
        if max_chars is not None:
            bounded["maxLength"] = min(int(bounded.get("maxLength", max_chars)), max_chars)
    return bounded


def tools_prompt(tools: Sequence[ToolSpec], *, reply: bool) -> str:
    """What the model reads about the tools: one line each, and the one reply it may give."""
    lines = [
        f"- {spec.name}({', '.join(_argument_names(spec))}): {spec.description}"
        for spec in with_reply(tools, reply)
    ]
    return (
        "Tools (call one per reply; use file names exactly as the task gives them):\n"
        + "\n".join(lines)
        + '\nReply with exactly one JSON object: {"tool": "<name>", "arguments": {...}}.'
    )


def _argument_names(spec: ToolSpec) -> list[str]:
    return list(_variant(spec, None)["properties"]["arguments"]["properties"])


def parse_call(text: str, tools: Sequence[ToolSpec]) -> ToolCall | str | None:
    """The call a reply stands for, its text for a text reply, or None when it is neither."""
    try:
        reply = json.loads(text)
    except ValueError:
        return None
    if not isinstance(reply, dict):
        return None
    name, arguments = reply.get("tool"), reply.get("arguments")
    if name == REPLY and isinstance(arguments, dict):
        return str(arguments.get("text", ""))
    if name not in {spec.name for spec in tools} or not isinstance(arguments, dict):
        return None
    raw = json.dumps(arguments)
    return ToolCall(
        id=f"call_{uuid.uuid4().hex[:16]}", name=str(name), arguments=arguments, raw_arguments=raw
    )


def plain_history(messages: Sequence[Message]) -> list[Message]:
    """The conversation without tool roles: each call as the JSON it was, each result as a user turn.

    Consecutive user texts are merged (a chat template expects turns to alternate).
    """
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            # A call's reply text is its JSON already; the calls alone say it once.
            calls = [json.dumps({"tool": c.name, "arguments": dict(c.arguments)}) for c in message.tool_calls]
            out.append(AssistantMessage(text="\n".join(calls) or message.text or "{}"))
            continue
        text = message.text if isinstance(message, UserMessage) else _result_text(message)
        previous = out[-1] if out else None
        if isinstance(previous, UserMessage):
            out[-1] = UserMessage(text=f"{previous.text}\n\n{text}")
        else:
            out.append(UserMessage(text=text))
    return out


def _result_text(result: ToolResultMessage) -> str:
    content = result.content
    if len(content) > _RESULT_MAX_CHARS:
        content = (
            content[:_RESULT_MAX_CHARS] + f"\n[... {len(result.content) - _RESULT_MAX_CHARS} more characters]"
        )
    status = "failed" if result.is_error else "result"
    return f"{result.name} {status}:\n{content}"
