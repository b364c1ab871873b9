"""The terminal view: the approver's prompt, the table at 80 columns, action lines, the final panel."""

from __future__ import annotations

import dataclasses
import io
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from approvals.permissions import Action
from approvals.testing import EPOCH, sample_request
from bot.cli.run import UsageError, read_task
from bot.cli.run_view import (
    CHOICES_PROMPT,
    LiveView,
    action_line,
    agent_table,
    approval_text,
    final_panel,
)
from orchestrator import (
    ActionResult,
    AgentInfo,
    AgentStatus,
    AnswerSubmitted,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    RunView,
    TextDelta,
    ToolDecided,
    UsageUpdated,
    VoteCast,
)


def test_the_request_shows_what_layer_risk_and_expiry() -> None:
    request = sample_request(action=Action(kind="command", target="git push origin main"), layer="rule")
    text = approval_text(request, now=EPOCH + timedelta(seconds=60)).plain
    assert "agent1 wants to run" in text
    assert "git push origin main" in text
    assert "risk medium · layer rule · asked" in text
    assert "expires in 240 s (12:05:00 UTC)" in text


def test_markup_in_the_action_is_shown_as_written() -> None:
    target = "echo '[bold red]approved[/] [link=https://evil.example]x[/link]'"
    console = Console(record=True, width=200, color_system=None)
    console.print(approval_text(sample_request(action=Action(kind="command", target=target)), now=EPOCH))
    assert target in console.export_text()


def test_the_choices_keep_their_brackets() -> None:
    console = Console(record=True, width=200, color_system=None)
    console.print(CHOICES_PROMPT, markup=False, highlight=False)
    assert "[y] yes, once · [r] yes, for this run · [n] no:" in console.export_text()


AGENTS = (
    AgentInfo(agent_id="alpha", label="agent1", backend="openai", model="gpt-4o-mini"),
    AgentInfo(agent_id="beta", label="agent2", backend="claude", model="claude-sonnet-4-5"),
    AgentInfo(agent_id="gamma", label="agent3", backend="chatcompletion", model="llama3"),
)


def busy_view() -> RunView:
    return RunView.of(busy_view_events())


def busy_view_events() -> list[RunEvent]:
    return [
        RunStarted(run_id="r", seq=1, at=1.0, task="t", agents=AGENTS),
        AgentStatus(run_id="r", seq=2, agent_id="beta", status="awaiting_approval", detail=""),
        AnswerSubmitted(run_id="r", seq=3, agent_id="alpha", label="agent1.1", content="x"),
        VoteCast(
            run_id="r", seq=4, agent_id="gamma", voted_for="alpha", voted_for_label="agent1.1", reason="ok"
        ),
        TextDelta(run_id="r", seq=5, agent_id="alpha", text="reading tests"),
        UsageUpdated(
            run_id="r",
            seq=6,
            agent_id="alpha",
            input_tokens=123_456,
            output_tokens=7_890,
            cost_usd=0.1234,
            run_input_tokens=123_456,
            run_output_tokens=7_890,
            run_cost_usd=0.1234,
        ),
    ]


def test_the_table_fits_80_columns_and_keeps_the_numbers_whole() -> None:
    console = Console(record=True, width=80, color_system=None)
    console.print(agent_table(busy_view()))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    for whole in ("agent1 (alpha)", "agent2 (beta)", "awaiting approval", "agent1.1", "123k/7.9k", "$0.123"):
        assert whole in text, whole
    assert "reading tests" in text  # the latest text still gets some room


def test_action_lines_say_what_happened() -> None:
    view = busy_view()

    def line(**fields: Any) -> str:
        base: dict[str, Any] = {"agent_id": "alpha", "tool": "run_command", "action": "command(make test)"}
        return action_line(ActionResult(**(base | fields)), view).plain

    assert (
        line(outcome="ran", exit_code=0, asked=True)
        == "agent1 (alpha) · ran (exit code 0) · command(make test)"
    )
    assert line(outcome="failed", exit_code=2) == "agent1 (alpha) · failed (exit code 2) · command(make test)"
    assert line(outcome="failed", reason="run_command failed: boom") == (
        "agent1 (alpha) · failed · command(make test): run_command failed: boom"
    )
    assert (
        line(outcome="denied", reason="denied by U1: no")
        == "agent1 (alpha) · denied · command(make test): denied by U1: no"
    )
    assert line(outcome="expired", asked=True) == (
        "agent1 (alpha) · expired · command(make test): nobody answered in time"
    )


def test_the_final_panel_lists_what_was_asked_for_and_not_done() -> None:
    view = busy_view()
    asked = ActionResult(agent_id="beta", tool="fetch_url", action="fetch(https://x.test)", outcome="denied",
                         asked=True, reason="denied: no terminal to ask")  # fmt: skip
    floored = ActionResult(agent_id="beta", tool="run_command", action="command(rm -rf /)", outcome="denied")
    view = dataclasses.replace(view, actions=(asked, floored))
    console = Console(record=True, width=80, color_system=None)
    for terminal in (RunFinished(winner="alpha", answer="done"), RunFailed(reasons={"run": "[exit code 1]"})):
        console.print(final_panel(terminal, view))
    text = console.export_text()
    assert text.count("asked for but not done, or failed:") == 2
    assert text.count("fetch(https://x.test)") == 2
    assert "rm -rf" not in text  # the engine refused it and the agent moved on: not a missing piece
    assert "[exit code 1]" in text  # a failure reason is text, never markup


def test_the_task_comes_from_words_a_file_or_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = tmp_path / "task.md"
    task.write_text("  fix the flaky test\n")
    assert read_task(["fix", "it"], None) == "fix it"
    assert read_task([], task) == "fix the flaky test"
    monkeypatch.setattr(sys, "stdin", io.StringIO("from stdin\n"))
    assert read_task(["-"], None) == "from stdin"
    for words, path, error in [
        (["x"], task, "not both"),
        ([], tmp_path / "missing.md", "cannot read the task file"),
        (["  "], None, "the task is empty"),
    ]:
        with pytest.raises(UsageError, match=error):
            read_task(words, path)


def test_without_a_terminal_each_change_is_one_plain_line_and_prompts_go_to_stderr() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, width=40))  # a file: not a terminal, and narrower than a line
    assert view.console.stderr  # the approver's prompt must not vanish into the file
    for event in busy_view_events():
        view.on_event(event)
    view.on_event(
        ToolDecided(
            run_id="r",
            seq=7,
            agent_id="beta",
            call_id="c",
            tool="run_command",
            action="command(make)",
            decision="allow",
            risk="low",
            layer="rule",
            reason="approved by cli:me",
            executed=True,
            outcome="failed",
            exit_code=2,
            request_id="req-1",
        )
    )
    lines = out.getvalue().splitlines()
    assert "\x1b" not in out.getvalue()
    assert lines == [
        "agents: agent1 (alpha) gpt-4o-mini, agent2 (beta) claude-sonnet-4-5, agent3 (gamma) llama3",
        "agent1 (alpha) answered: agent1.1",
        "agent3 (gamma) votes for agent1.1",
        "agent2 (beta) · failed (exit code 2) · command(make)",
    ]


def test_a_resumed_run_folds_its_stored_events_without_saying_them_again() -> None:
    out = io.StringIO()
    events = busy_view_events()
    view = LiveView(Console(file=out, width=80))
    view.replay(events[:3])  # what the killed process had shown: the start and alpha's answer
    assert out.getvalue() == ""
    for event in events[3:]:  # the resumed run's new events: only their changes are said
        view.on_event(event)
    assert out.getvalue().splitlines() == ["agent3 (gamma) votes for agent1.1"]
    fresh = LiveView(Console(file=io.StringIO(), width=80))
    for event in events:
        fresh.on_event(event)
    assert view.view == fresh.view  # the cards are where an unbroken run would have them


@pytest.mark.parametrize(
    "answer",
    [
        "<task>summarise the logs</task>\nThe logs show two restarts.",  # an answer opening with a tag
        "Wrap it in a <div>box</div> and use `a < b`.",  # inline tags
        "<details>\n\nhidden?\n\n</details>",  # an HTML block
        "[bold]not a style[/bold] and [/] and [link=x]y[/link]",  # rich's own markup: text too
    ],
)
def test_the_final_answer_shows_tags_as_written(answer: str) -> None:
    console = Console(record=True, width=100, color_system=None)
    console.print(final_panel(RunFinished(winner="alpha", answer=answer), None))
    text = console.export_text()
    for line in answer.replace("`", "").splitlines():
        if line:
            assert line in text
