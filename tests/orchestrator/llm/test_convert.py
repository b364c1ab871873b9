"""Pure conversions: tool-call parsing, stop reasons, message shapes."""

from __future__ import annotations

import pytest

from orchestrator.llm import convert
from orchestrator.llm.base import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage


@pytest.mark.parametrize(
    ("raw", "arguments", "kept_raw"),
    [
        ('{"cmd": "ls"}', {"cmd": "ls"}, ""),
        ("", {}, ""),
        ("  ", {}, ""),
        ("{}", {}, ""),
        ('{"cmd": "ls"', {}, '{"cmd": "ls"'),
        ("[1, 2]", {}, "[1, 2]"),
        ('"text"', {}, '"text"'),
        ("null", {}, "null"),
    ],
)
def test_parse_tool_call(raw: str, arguments: dict[str, str], kept_raw: str) -> None:
    call = convert.parse_tool_call("c1", "shell", raw)
    assert (call.id, call.name, dict(call.arguments), call.raw_arguments) == (
        "c1",
        "shell",
        arguments,
        kept_raw,
    )


@pytest.mark.parametrize(
    ("finish", "stop"),
    [("stop", "end_turn"), ("tool_calls", "tool_use"), ("length", "max_tokens"), ("content_filter", "other"),
     (None, "other")],
)  # fmt: skip
def test_chat_stop_reason(finish: str | None, stop: str) -> None:
    assert convert.chat_stop_reason(finish) == stop


@pytest.mark.parametrize(
    ("reason", "stop"),
    [("end_turn", "end_turn"), ("stop_sequence", "end_turn"), ("tool_use", "tool_use"),
     ("max_tokens", "max_tokens"), ("model_context_window_exceeded", "max_tokens"), ("refusal", "other"),
     ("pause_turn", "other"), (None, "other")],
)  # fmt: skip
def test_anthropic_stop_reason(reason: str | None, stop: str) -> None:
    assert convert.anthropic_stop_reason(reason) == stop


@pytest.mark.parametrize(
    ("status", "incomplete", "called", "stop"),
    [("completed", None, False, "end_turn"), ("completed", None, True, "tool_use"),
     ("incomplete", "max_output_tokens", False, "max_tokens"),
     ("incomplete", "content_filter", True, "other"), ("failed", None, False, "other")],
)  # fmt: skip
def test_responses_stop_reason(status: str, incomplete: str | None, called: bool, stop: str) -> None:
    assert convert.responses_stop_reason(status, incomplete, called) == stop


HISTORY: list[Message] = [
    UserMessage(text="go"),
    AssistantMessage(
        tool_calls=(ToolCall(id="a", name="sh", arguments={}), ToolCall(id="b", name="sh", arguments={}))
    ),
    ToolResultMessage(call_id="a", name="sh", content="1"),
    ToolResultMessage(call_id="b", name="sh", content="2"),
    UserMessage(text="and?"),
]


def test_anthropic_turns_alternate() -> None:
    turns = convert.anthropic_messages(HISTORY)
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "tool_result", "text"]


def test_chat_and_responses_keep_one_entry_per_result() -> None:
    chat = convert.chat_messages("sys", HISTORY)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert chat[2]["content"] is None
    items = convert.responses_input(HISTORY)
    assert [i.get("type", i.get("role")) for i in items] == [
        "user", "function_call", "function_call", "function_call_output", "function_call_output", "user"
    ]  # fmt: skip
