"""Turn checkpoints: a resumed run rebuilds in-flight turns; completed calls are never made again.

Each test runs a real run (real toolbox and gate, in-memory stores) until a chosen point, keeps the
event log as the database held it there (a crash), and resumes a copy of that log with fresh models.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from approvals import ApprovalService
from approvals.permissions import PermissionConfig
from approvals.testing import InMemoryApprovalStore, InMemoryAuditLog
from orchestrator import (
    InMemoryRunStore,
    RunContext,
    RunFinished,
    RunTools,
    build_run_tools,
    resume_run,
    start_run,
)
from orchestrator.events import ModelCallCompleted, RunEvent, ToolStarted, TurnMessage, UsageUpdated
from orchestrator.llm.base import AssistantMessage, ToolResultMessage, UserMessage
from orchestrator.run.checkpoint import INTERRUPTED, restore
from orchestrator.testing import ScriptedModels, Turn, call, ended, hang, scripted_team
from tests.orchestrator.tools.fakes import ScriptedEngine


class Crash:
    """A run stopped at the first event matching `at` (the log is cut right after it)."""

    def __init__(self, tmp_path: Path) -> None:
        self.side = tmp_path / "side.log"
        self.root = tmp_path / "ws"
        self.service = ApprovalService(InMemoryApprovalStore(), InMemoryAuditLog(), poll_interval=0.01)
        team = scripted_team(2, timeout_seconds=60)
        self.team = team.model_copy(update={"sandbox": "none"})
        self.command = f"echo ran >> {self.side}"

    async def tools(self, ctx: RunContext) -> RunTools:
        def engine(_config: PermissionConfig) -> ScriptedEngine:
            return ScriptedEngine({})  # every command allowed

        return await build_run_tools(ctx, approvals=self.service, root=self.root, engine_factory=engine)

    def ran(self) -> int:
        return len(self.side.read_text().splitlines()) if self.side.exists() else 0

    async def run_until(self, at: Callable[[RunEvent], bool], *, a1_answers: bool = False) -> list[RunEvent]:
        """a0 runs the command, then its next model call hangs; a1 hangs (or answers). Returns the cut log."""
        store = InMemoryRunStore()
        reached, release = asyncio.Event(), asyncio.Event()
        cut: list[RunEvent] = []

        async def watch(event: RunEvent) -> None:  # subscribers see an event after the store has it
            if reached.is_set():
                return
            cut.append(event)
            if at(event):
                reached.set()
                # Hold the delivery (so nothing later is stored, and no tool can start) until the
                # run's tasks are stopped: what a `kill -9` at this point would leave behind.
                await release.wait()

        first = Turn(text="let me check", calls=(call("run_command", command=self.command),))
        models = ScriptedModels({"a0": [first, hang()], "a1": [] if a1_answers else [hang()]})
        handle = await start_run(
            self.team, "t", models=models, tools=self.tools, store=store, run_id="run-1", subscribers=[watch]
        )
        await asyncio.wait_for(reached.wait(), timeout=20)
        stopping = asyncio.create_task(handle.cancel())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while (self.root / "run-1").exists():  # removed once every agent task has stopped
            assert loop.time() < deadline, "the run did not stop"
            await asyncio.sleep(0.01)
        release.set()
        await stopping
        await ended(handle)
        return cut

    async def resume(self, log: list[RunEvent]) -> tuple[RunFinished, ScriptedModels, InMemoryRunStore]:
        store = InMemoryRunStore()
        for event in log:
            await store.append(event)
        models = ScriptedModels()
        handle = await resume_run("run-1", self.team, store, models=models, tools=self.tools)
        result = await asyncio.wait_for(ended(handle), timeout=20)
        assert isinstance(result, RunFinished)
        return result, models, store


def kinds(request_messages: tuple[object, ...]) -> list[str]:
    return [type(m).__name__ for m in request_messages]


async def test_a_completed_model_call_and_tool_call_are_not_repeated(tmp_path: Path) -> None:
    crash = Crash(tmp_path)
    log = await crash.run_until(lambda e: isinstance(e, TurnMessage) and e.role == "tool")
    assert crash.ran() == 1
    result, models, store = await crash.resume(log)
    assert crash.ran() == 1  # not re-run
    first = models.clients["a0"].requests[0]
    assert kinds(first.messages) == ["UserMessage", "AssistantMessage", "ToolResultMessage"]
    reply = first.messages[1]
    assert isinstance(reply, AssistantMessage)
    assert reply.text == "let me check"
    assert [c.name for c in reply.tool_calls] == ["run_command"]
    # The first segment's spend is kept; its model call is billed once.
    events = await store.events("run-1")
    usage_before = [e for e in log if isinstance(e, UsageUpdated)]
    assert usage_before
    assert result.input_tokens > usage_before[-1].run_input_tokens
    assert sum(isinstance(e, ModelCallCompleted) and e.agent_id == "a0" for e in events) == 1 + len(
        models.clients["a0"].requests
    )


async def test_a_tool_started_and_never_completed_is_reported_not_rerun(tmp_path: Path) -> None:
    crash = Crash(tmp_path)
    log = await crash.run_until(lambda e: isinstance(e, ToolStarted))
    ran_before = crash.ran()  # the process may or may not have got to run it before it "died"
    _, models, store = await crash.resume(log)
    assert crash.ran() == ran_before
    first = models.clients["a0"].requests[0]
    result = first.messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert result.is_error
    assert result.content.startswith(INTERRUPTED)
    events = await store.events("run-1")
    assert sum(isinstance(e, ToolStarted) for e in events) == 1


async def test_a_reply_whose_tool_never_started_runs_it_once_without_a_new_model_call(tmp_path: Path) -> None:
    crash = Crash(tmp_path)
    log = await crash.run_until(lambda e: isinstance(e, ModelCallCompleted) and e.agent_id == "a0")
    assert crash.ran() == 0
    _, models, _ = await crash.resume(log)
    assert crash.ran() == 1
    first = models.clients["a0"].requests[0]
    assert kinds(first.messages) == ["UserMessage", "AssistantMessage", "ToolResultMessage"]


async def test_a_crash_between_turns_keeps_the_conversation_and_the_held_result(tmp_path: Path) -> None:
    crash = Crash(tmp_path)
    log = await crash.run_until(lambda e: e.kind == "answer", a1_answers=True)
    restored = restore(log)
    a1 = restored.conversation("a1", "coordination")
    assert a1 is not None
    assert not a1.in_turn
    assert a1.held is not None
    assert "agent2.1" in a1.held.text  # "your answer was recorded as agent2.1"
    _, models, _ = await crash.resume(log)
    opening = models.clients["a1"].requests[0].messages
    assert kinds(opening) == ["UserMessage", "AssistantMessage", "ToolResultMessage"]
    assert isinstance(opening[0], UserMessage)


@pytest.mark.parametrize("structured", [True])
async def test_checkpoint_payloads_are_bounded_by_the_tool_output_cap(
    tmp_path: Path, structured: bool
) -> None:
    crash = Crash(tmp_path)
    limit = crash.team.tools.output_limit_bytes
    crash.command = f"head -c {limit * 3} /dev/zero | tr '\\\\0' x"
    log = await crash.run_until(lambda e: isinstance(e, TurnMessage) and e.role == "tool")
    [result] = [e for e in log if isinstance(e, TurnMessage) and e.role == "tool"]
    assert len(result.text.encode()) <= limit + 200  # the cap plus its "[truncated]" note
