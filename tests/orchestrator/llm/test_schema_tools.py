"""Tool calls as grammar-held JSON for the embedded model: the schema, the parse and the history."""

from __future__ import annotations

import json

from orchestrator.llm import schema_tools
from orchestrator.llm.base import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from orchestrator.run import prompts
from orchestrator.run.coordination import AgentView, CoordinationState
from orchestrator.tools.specs import tool_specs

STATE = CoordinationState(agents={"a": AgentView(agent_id="a", label="agent1")})
WORKFLOW = prompts.workflow_specs(STATE, may_answer=True)
TOOLBOX = tool_specs()


def test_the_turn_ending_names_are_the_runs_workflow_tools() -> None:
    assert schema_tools.TURN_ENDING == prompts.WORKFLOW_TOOLS


def test_the_first_reply_offers_only_the_small_toolbox_then_the_workflow_too() -> None:
    first = schema_tools.offered([*WORKFLOW, *TOOLBOX], [UserMessage(text="task")])
    assert {s.name for s in first} == {"list_files", "read_file", "run_command", "write_file"}
    result = ToolResultMessage(call_id="c1", name="read_file", content="7.3.1")
    later = schema_tools.offered([*WORKFLOW, *TOOLBOX], [UserMessage(text="task"), result])
    assert {s.name for s in later} == {"list_files", "read_file", "run_command", "write_file", "new_answer"}


def test_the_schema_is_one_object_per_tool_and_a_reply_only_in_a_presentation() -> None:
    schema = schema_tools.call_schema(TOOLBOX[:2], max_tokens=128, reply=False).schema
    names = [v["properties"]["tool"]["enum"] for v in schema["anyOf"]]
    assert names == [["read_file"], ["write_file"]]
    read = schema["anyOf"][0]["properties"]["arguments"]
    assert read["required"] == ["path"]  # start_line and max_lines (defaults) are dropped
    assert read["properties"]["path"]["pattern"].startswith("^[A-Za-z0-9_]")
    content = schema["anyOf"][1]["properties"]["arguments"]["properties"]["content"]
    assert content["maxLength"] == 2 * (128 - 48)
    presenting = schema_tools.call_schema(TOOLBOX[:1], max_tokens=None, reply=True).schema
    assert [v["properties"]["tool"]["enum"] for v in presenting["anyOf"]] == [["read_file"], ["reply"]]


def test_a_reply_becomes_a_call_a_text_or_nothing() -> None:
    call = schema_tools.parse_call('{"tool": "read_file", "arguments": {"path": "VERSION"}}', TOOLBOX)
    assert isinstance(call, ToolCall)
    assert (call.name, dict(call.arguments)) == ("read_file", {"path": "VERSION"})
    assert schema_tools.parse_call('{"tool": "reply", "arguments": {"text": "done"}}', TOOLBOX) == "done"
    assert schema_tools.parse_call('{"tool": "rm", "arguments": {}}', TOOLBOX) is None
    assert schema_tools.parse_call('{"tool": "read_file", "arguments": {"path": "VERS', TOOLBOX) is None


def test_the_history_has_no_tool_roles_and_alternates() -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "VERSION"})
    history = schema_tools.plain_history(
        [
            UserMessage(text="task"),
            AssistantMessage(text='{"tool": "read_file"}', tool_calls=(call,)),
            ToolResultMessage(call_id="c1", name="read_file", content="7.3.1"),
            UserMessage(text="Current answers: none"),
        ]
    )
    assert [m.role for m in history] == ["user", "assistant", "user"]
    assert isinstance(history[1], AssistantMessage)
    assert json.loads(history[1].text) == {"tool": "read_file", "arguments": {"path": "VERSION"}}
    assert isinstance(history[2], UserMessage)
    assert history[2].text == "read_file result:\n7.3.1\n\nCurrent answers: none"
