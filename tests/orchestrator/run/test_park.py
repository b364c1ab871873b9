"""Parking: an ask ends the asking agent's task; a decision resumes the run by id (issue 11).

The real runner, the real toolbox and gate, the real `ApprovalService` (in-memory store), an
in-memory run store; the only scripted parts are the models and the engine's verdict on one command.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from approvals import ApprovalService, Principal
from approvals.permissions import PermissionConfig
from approvals.testing import FrozenClock, InMemoryApprovalStore, InMemoryAuditLog
from orchestrator import (
    InMemoryRunStore,
    Parked,
    RunCancelled,
    RunContext,
    RunDriver,
    RunFinished,
    RunTools,
    TeamConfig,
    ToolAwaiting,
    ToolStarted,
    build_run_tools,
    resume_run,
    start_run,
    stop_parked_run,
)
from orchestrator.events import RunEvent, RunParked, ToolApprovalResolved, ToolDecided
from orchestrator.llm.base import ToolResultMessage
from orchestrator.testing import Request, Script, ScriptedModels, Turn, call, protocol, scripted_team
from tests.orchestrator.tools.fakes import ASK, ScriptedEngine

APPROVER = Principal(id="U_APPROVER")


class World:
    """One run's surroundings, shared by every process segment (start, resumes)."""

    def __init__(self, tmp_path: Path, agents: int = 2) -> None:
        self.clock = FrozenClock(datetime.now(UTC))  # moved by hand to expire a request
        self.service = ApprovalService(
            InMemoryApprovalStore(), InMemoryAuditLog(), self.clock, poll_interval=0.01
        )
        self.store = InMemoryRunStore()
        self.side = tmp_path / "side.log"  # what the approved command appends to
        self.command = f"echo ran >> {self.side}"
        self.root = tmp_path / "ws"
        team = scripted_team(agents, timeout_seconds=60)
        approvals = team.approvals.model_copy(update={"approvers": [APPROVER.id]})
        self.team: TeamConfig = team.model_copy(update={"sandbox": "none", "approvals": approvals})

    async def tools(self, ctx: RunContext) -> RunTools:
        def engine(_config: PermissionConfig) -> ScriptedEngine:
            return ScriptedEngine({self.command: ASK})

        return await build_run_tools(ctx, approvals=self.service, root=self.root, engine_factory=engine)

    def first_ask(self) -> Script:
        """Ask for the command unless the conversation already has its result (then: the protocol)."""

        def script(request: Request) -> Turn:
            if any(isinstance(m, ToolResultMessage) for m in request.messages):
                return protocol(request)
            return Turn(calls=(call("run_command", command=self.command),))

        return script

    def ran(self) -> int:
        return len(self.side.read_text().splitlines()) if self.side.exists() else 0

    async def events(self, run_id: str = "run-1") -> list[RunEvent]:
        return await self.store.events(run_id)

    async def parked(self, models: ScriptedModels) -> Parked:
        handle = await start_run(
            self.team, "t", models=models, tools=self.tools, store=self.store, run_id="run-1"
        )
        outcome = await asyncio.wait_for(handle.outcome(), timeout=20)
        assert isinstance(outcome, Parked)
        return outcome

    async def resume(self, models: ScriptedModels) -> Parked | RunFinished | RunCancelled:
        handle = await resume_run("run-1", self.team, self.store, models=models, tools=self.tools)
        outcome = await asyncio.wait_for(handle.outcome(), timeout=20)
        assert not isinstance(outcome, RunFinished) or outcome.winner is not None
        return outcome  # type: ignore[return-value]


async def test_an_ask_parks_its_agent_while_the_others_work_then_the_whole_run(tmp_path: Path) -> None:
    world = World(tmp_path)
    models = ScriptedModels({"a0": [world.first_ask()]})
    parked = await world.parked(models)

    [request] = await world.service.pending(run_id="run-1")
    assert parked == Parked(run_id="run-1", waiting=(request.id,))
    events = await world.events()
    assert [e.agent_id for e in events if e.kind == "answer"] == ["a1"]  # a1 worked meanwhile
    awaiting = [e for e in events if isinstance(e, ToolAwaiting)]
    assert [(e.agent_id, e.request_id) for e in awaiting] == [("a0", request.id)]
    assert isinstance(events[-1], RunParked)
    assert events[-1].waiting == (request.id,)
    assert models.calls == 2  # a0's ask, a1's answer; a1 then waits for a0's first answer
    assert world.ran() == 0
    summary = await world.store.get("run-1")
    assert summary is not None
    assert summary.running
    assert (world.root / "run-1" / "a0").is_dir()  # the workspaces stay for the resume


async def test_a_resume_with_nothing_decided_parks_again_without_a_model_call(tmp_path: Path) -> None:
    world = World(tmp_path)
    first = await world.parked(ScriptedModels({"a0": [world.first_ask()]}))
    again = ScriptedModels()
    assert await world.resume(again) == first
    assert again.calls == 0
    assert world.ran() == 0
    assert len(await world.service.pending(run_id="run-1")) == 1  # nothing asked twice


async def test_approved_the_call_executes_exactly_once_and_the_turn_goes_on(tmp_path: Path) -> None:
    world = World(tmp_path)
    await world.parked(ScriptedModels({"a0": [world.first_ask()]}))
    [request] = await world.service.pending(run_id="run-1")
    await world.service.decide(request.id, APPROVER, approve=True)

    resumed = ScriptedModels()
    outcome = await world.resume(resumed)
    assert isinstance(outcome, RunFinished)
    assert outcome.salvage is None
    assert world.ran() == 1
    events = await world.events()
    [started] = [e for e in events if isinstance(e, ToolStarted)]
    assert (started.agent_id, started.request_id) == ("a0", request.id)
    [resolved] = [e for e in events if isinstance(e, ToolApprovalResolved)]
    assert (resolved.request_id, resolved.status) == (request.id, "approved")
    # a0's next model call continued the same turn: it saw its own call's result, not a new task.
    first = resumed.clients["a0"].requests[0]
    assert [m.__class__.__name__ for m in first.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    assert [e.agent_id for e in events if e.kind == "answer"] == ["a1", "a0"]
    # Nothing of the first segment was asked again: a0 answered, both voted, the winner presented.
    assert resumed.calls == 1 + 2 + 1


@pytest.mark.parametrize("how", ["deny", "expire"])
async def test_denied_or_expired_the_call_never_executes(tmp_path: Path, how: str) -> None:
    world = World(tmp_path)
    await world.parked(ScriptedModels({"a0": [world.first_ask()]}))
    [request] = await world.service.pending(run_id="run-1")
    if how == "deny":
        await world.service.decide(request.id, APPROVER, approve=False, reason="not today")
    else:
        world.clock.advance(timedelta(seconds=world.team.approvals.timeout_seconds + 1))
        assert [r.id for r in await world.service.expire_due()] == [request.id]
    outcome = await world.resume(ScriptedModels())
    assert isinstance(outcome, RunFinished)
    assert world.ran() == 0
    events = await world.events()
    assert not [e for e in events if isinstance(e, ToolStarted)]
    decided = [e for e in events if isinstance(e, ToolDecided) and e.agent_id == "a0"]
    assert [(d.executed, d.reason.split(":")[0]) for d in decided] == [
        (False, "denied by U_APPROVER" if how == "deny" else "denied")
    ]
    stored = await world.service.get(request.id)
    assert stored is not None
    assert stored.status == ("denied" if how == "deny" else "expired")


@pytest.mark.parametrize("how", ["cancel", "finish_now"])
async def test_cancel_or_finish_now_of_a_parked_run_ends_it_without_its_agents(
    tmp_path: Path, how: str
) -> None:
    world = World(tmp_path)
    await world.parked(ScriptedModels({"a0": [world.first_ask()]}))
    [request] = await world.service.pending(run_id="run-1")
    terminal = await stop_parked_run("run-1", world.team, world.store, how, by="U_BOSS", tools=world.tools)  # type: ignore[arg-type]
    if how == "cancel":
        assert terminal == RunCancelled(run_id="run-1", seq=terminal.seq, at=terminal.at, by="U_BOSS")
        reason = "the run was cancelled by U_BOSS"
    else:
        assert isinstance(terminal, RunFinished)
        assert (terminal.winner, terminal.salvage) == ("a1", "finish_now:latest_answer")
        reason = "the run was finished early by U_BOSS"
    stored = await world.service.get(request.id)
    assert stored is not None
    assert (stored.status, stored.decision_reason) == ("cancelled", reason)
    assert world.ran() == 0
    assert not (world.root / "run-1").exists()  # ended: its workspaces are removed
    summary = await world.store.get("run-1")
    assert summary is not None
    assert summary.status == ("cancelled" if how == "cancel" else "finished")


async def test_the_driver_resumes_after_a_decision_made_elsewhere(tmp_path: Path) -> None:
    world = World(tmp_path)
    models = ScriptedModels({"a0": [world.first_ask()]})
    driver = RunDriver(
        world.team, approvals=world.service, store=world.store, models=models, tools=world.tools
    )

    async def approver() -> None:  # another process's click: the driver only sees the stored decision
        request = await world.service._store.query(status="pending")
        while not request:
            await asyncio.sleep(0)
            request = await world.service._store.query(status="pending")
        await world.service.decide(request[0].id, APPROVER, approve=True)

    clicking = asyncio.create_task(approver())
    terminal = await asyncio.wait_for(driver.start("t", run_id="run-1"), timeout=30)
    await clicking
    assert isinstance(terminal, RunFinished)
    assert terminal.salvage is None
    assert driver.parks == 1
    assert world.ran() == 1


async def test_the_driver_cancels_a_run_parked_on_a_human(tmp_path: Path) -> None:
    world = World(tmp_path)
    parked = asyncio.Event()

    def on_event(event: RunEvent) -> None:
        if event.kind == "parked":
            parked.set()

    models = ScriptedModels({"a0": [world.first_ask()]})
    driver = RunDriver(
        world.team, approvals=world.service, store=world.store, models=models, tools=world.tools,
        subscribers=[on_event],
    )  # fmt: skip
    driving = asyncio.create_task(driver.start("t", run_id="run-1"))
    await asyncio.wait_for(parked.wait(), timeout=20)
    await driver.stop("cancel", by="U_BOSS")
    terminal = await asyncio.wait_for(driving, timeout=20)
    assert isinstance(terminal, RunCancelled)
    assert terminal.by == "U_BOSS"
    assert await world.service.pending(run_id="run-1") == []
    assert world.ran() == 0


async def test_the_timeout_counts_working_time_not_parked_time(tmp_path: Path) -> None:
    world = World(tmp_path)
    await world.parked(ScriptedModels({"a0": [world.first_ask()]}))
    events = await world.events()
    worked = sum(e.worked_seconds for e in events if isinstance(e, RunParked))
    assert 0 < worked < 60
    # The same log with its working time used up: the resume salvages at once instead of working.
    spent = InMemoryRunStore()
    for event in events:
        if isinstance(event, RunParked):
            event = RunParked(
                run_id=event.run_id, seq=event.seq, at=event.at, waiting=event.waiting, worked_seconds=60.0
            )
        await spent.append(event)
    world.store = spent
    models = ScriptedModels()
    outcome = await world.resume(models)
    assert isinstance(outcome, RunFinished)
    assert outcome.salvage == "timeout:latest_answer"
    assert models.calls == 0


async def test_a_final_phase_ask_parks_the_run_and_the_presentation_goes_on_after_it(tmp_path: Path) -> None:
    world = World(tmp_path)

    def presenter(request: Request) -> Turn:
        final = not request.tool_names & {"new_answer", "vote"}
        if final and not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return Turn(calls=(call("run_command", command=world.command),))
        return protocol(request)

    handle = await start_run(
        world.team, "t", models=ScriptedModels(then=presenter), tools=world.tools, store=world.store,
        run_id="run-1",
    )  # fmt: skip
    parked = await asyncio.wait_for(handle.outcome(), timeout=20)
    assert isinstance(parked, Parked)
    [request] = await world.service.pending(run_id="run-1")
    assert parked.waiting == (request.id,)
    assert [e.phase for e in await world.events() if isinstance(e, ToolAwaiting)] == ["final"]
    await world.service.decide(request.id, APPROVER, approve=True)
    resumed = ScriptedModels(then=presenter)
    outcome = await world.resume(resumed)
    assert isinstance(outcome, RunFinished)
    assert outcome.salvage is None
    assert world.ran() == 1
    assert resumed.calls == 1  # only the presentation's next call: coordination was not redone


async def test_the_apply_back_ask_parks_the_run_and_the_approval_applies_the_patch_once(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    source = tmp_path / "src"
    source.mkdir()
    (source / "app.py").write_text("v1\n")
    workspace = world.team.workspace.model_copy(update={"source": source, "apply": "ask"})
    world.team = world.team.model_copy(update={"workspace": workspace})

    def writer(request: Request) -> Turn:  # every agent edits app.py first, then follows the protocol
        first = "new_answer" in request.tool_names and len(request.messages) == 1
        if first:
            return Turn(calls=(call("write_file", path="app.py", content="v2\n"),))
        return protocol(request)

    async def tools(ctx: RunContext) -> RunTools:
        def engine(_config: PermissionConfig) -> ScriptedEngine:
            return ScriptedEngine({str(source / "app.py"): ASK})

        return await build_run_tools(ctx, approvals=world.service, root=world.root, engine_factory=engine)

    world.tools = tools  # type: ignore[method-assign]
    handle = await start_run(
        world.team,
        "t",
        models=ScriptedModels(then=writer),
        tools=tools,
        store=world.store,
        run_id="run-1",
    )
    parked = await asyncio.wait_for(handle.outcome(), timeout=20)
    assert isinstance(parked, Parked)
    assert [e.phase for e in await world.events() if isinstance(e, ToolAwaiting)] == ["apply"]
    assert any(e.kind == "concluded" for e in await world.events())
    assert (source / "app.py").read_text() == "v1\n"
    await world.service.decide(parked.waiting[0], APPROVER, approve=True)
    resumed = ScriptedModels(then=writer)
    outcome = await world.resume(resumed)
    assert isinstance(outcome, RunFinished)
    assert outcome.applied is True
    assert (source / "app.py").read_text() == "v2\n"
    assert resumed.calls == 0  # straight back to the apply step
