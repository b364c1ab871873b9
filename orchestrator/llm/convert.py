"""Pure conversion between the model port's types and each provider's JSON shapes.

No SDK imports: the vendor adapters pass these dicts straight to the SDK calls, which accept
plain JSON-like params. Kept apart so the mapping is testable without a server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.llm.base import (
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)


def parse_tool_call(call_id: str, name: str, raw: str) -> ToolCall:
    """A `ToolCall` from streamed argument text.

    Invalid JSON (or JSON that is not an object) gives `arguments={}` and `raw_arguments` set to the
    text, so the caller can tell the model its call was malformed; valid calls leave it empty.
    """
    if not raw.strip():
        return ToolCall(id=call_id, name=name, arguments={})
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return ToolCall(id=call_id, name=name, arguments={}, raw_arguments=raw)
    return ToolCall(id=call_id, name=name, arguments=value)


def _arguments_json(call: ToolCall) -> str:
    """The arguments as sent back to the provider: the model's own text if it was malformed."""
    return call.raw_arguments or json.dumps(dict(call.arguments))


def _result_text(message: ToolResultMessage) -> str:
    # Chat Completions and Responses have no error flag on tool output; say it in the text.
    return f"ERROR: {message.content}" if message.is_error else message.content


# --- OpenAI Chat Completions ------------------------------------------------------------------


def chat_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Chat Completions `messages`, system prompt first."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.text})
        elif isinstance(m, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _arguments_json(c)},
                    }
                    for c in m.tool_calls
                ]
            out.append(entry)
        else:
            out.append({"role": "tool", "tool_call_id": m.call_id, "content": _result_text(m)})
    return out


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Chat Completions `tools`."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
        }
        for t in tools
    ]


def chat_stop_reason(finish_reason: str | None) -> StopReason:
    """Map `finish_reason` onto the port's stop reasons."""
    mapping: Mapping[str | None, StopReason] = {
        "stop": "end_turn",
        "tool_calls": "tool_use",
        "function_call": "tool_use",
        "length": "max_tokens",
    }
    return mapping.get(finish_reason, "other")


# --- OpenAI Responses -------------------------------------------------------------------------


def responses_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Responses `input` items; the system prompt goes in `instructions` instead."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.text})
        elif isinstance(m, AssistantMessage):
            if m.text:
                out.append({"role": "assistant", "content": m.text})
            out += [
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": _arguments_json(c)}
                for c in m.tool_calls
            ]
        else:
            out.append({"type": "function_call_output", "call_id": m.call_id, "output": _result_text(m)})
    return out


def responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Responses `tools` (flat function tools; `strict` off so free-form schemas are accepted)."""
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": dict(t.parameters),
            "strict": False,
        }
        for t in tools
    ]


def responses_stop_reason(
    status: str | None, incomplete_reason: str | None, called_tools: bool
) -> StopReason:
    """Responses have no finish reason: derive it from status and output items."""
    if status == "incomplete":
        return "max_tokens" if incomplete_reason == "max_output_tokens" else "other"
    if called_tools:
        return "tool_use"
    return "end_turn" if status == "completed" else "other"


# --- Anthropic Messages -----------------------------------------------------------------------


def anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Anthropic `messages`: tool results ride in user turns, and consecutive user blocks merge."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks})
            continue
        if isinstance(m, UserMessage):
            block: dict[str, Any] = {"type": "text", "text": m.text}
        else:
            block = {"type": "tool_result", "tool_use_id": m.call_id, "content": m.content}
            if m.is_error:
                block["is_error"] = True
        if out and out[-1]["role"] == "user":
            out[-1]["content"].append(block)  # the API wants user and assistant turns to alternate
        else:
            out.append({"role": "user", "content": [block]})
    return out


def anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Anthropic `tools`."""
    return [{"name": t.name, "description": t.description, "input_schema": dict(t.parameters)} for t in tools]


def anthropic_stop_reason(stop_reason: str | None) -> StopReason:
    """Map Anthropic's `stop_reason` onto the port's stop reasons."""
    mapping: Mapping[str | None, StopReason] = {
        "end_turn": "end_turn",
        "stop_sequence": "end_turn",
        "tool_use": "tool_use",
        "max_tokens": "max_tokens",
        "model_context_window_exceeded": "max_tokens",
    }
    return mapping.get(stop_reason, "other")
