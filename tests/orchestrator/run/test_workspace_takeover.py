"""A run taken over on another machine keeps its agents' files (issue 11: nothing is lost).

The real runner, toolbox, gate and `ApprovalService`, the real `SqlWorkspaceStore` on SQLite; the
models are scripted. The run parks on an approval after its agents wrote files; it resumes under
a different workspace root (the dead machine's disk is gone) and its answer's patch has the files.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import ApprovalService, Principal, make_engine
from approvals.permissions import PermissionConfig
from approvals.testing import FrozenClock, InMemoryApprovalStore, InMemoryAuditLog
from orchestrator import (
    InMemoryRunStore,
    Parked,
    RunContext,
    RunFinished,
    RunTools,
    RunView,
    SnapshotLimits,
    SqlWorkspaceStore,
    TeamConfig,
    WorkspaceRebuilt,
    build_run_tools,
    resume_run,
    start_run,
    workspace_metadata,
)
from orchestrator.config.team import WorkspaceConfig
from orchestrator.llm.base import ToolResultMessage
from orchestrator.testing import Request, Script, ScriptedModels, Turn, call, protocol, scripted_team
from tests.orchestrator.tools.fakes import ASK, ScriptedEngine

APPROVER = Principal(id="U_APPROVER")


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    made = make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    async with made.begin() as conn:
        await conn.run_sync(workspace_metadata.create_all)
    yield made
    await made.dispose()


class Machines:
    """One run's surroundings; `root` is the workspace root of the machine running it now."""

    def __init__(self, tmp_path: Path, engine: AsyncEngine, limits: SnapshotLimits | None = None) -> None:
        self.service = ApprovalService(
            InMemoryApprovalStore(), InMemoryAuditLog(), FrozenClock(datetime.now(UTC)), poll_interval=0.01
        )
        self.store = InMemoryRunStore()
        self.snapshots = SqlWorkspaceStore(engine)
        self.limits = limits or SnapshotLimits()
        self.root = tmp_path / "machine-1"
        source = tmp_path / "repo"
        source.mkdir()
        (source / "README.md").write_text("# repo\n")
        self.command = "echo checked > checked.txt"
        team = scripted_team(2, timeout_seconds=60)
        approvals = team.approvals.model_copy(update={"approvers": [APPROVER.id]})
        self.team: TeamConfig = team.model_copy(
            update={"sandbox": "none", "approvals": approvals, "workspace": WorkspaceConfig(source=source)}
        )

    async def tools(self, ctx: RunContext) -> RunTools:
        def engine(_config: PermissionConfig) -> ScriptedEngine:
            return ScriptedEngine({self.command: ASK})

        return await build_run_tools(
            ctx,
            approvals=self.service,
            root=self.root,
            engine_factory=engine,
            snapshots=self.snapshots,
            limits=self.limits,
        )

    def writes_then_asks(self, name: str, content: str) -> list[Turn | Script]:
        """Write a file (allowed), then ask for a command; once it has run, the protocol."""

        def ask(request: Request) -> Turn:
            if sum(isinstance(m, ToolResultMessage) for m in request.messages) >= 2:
                return protocol(request)
            return Turn(calls=(call("run_command", command=self.command),))

        return [Turn(calls=(call("write_file", path=name, content=content),)), ask]

    async def parked_on_machine_1(self) -> None:
        models = ScriptedModels({
            "a0": self.writes_then_asks("notes.txt", "a0 was here\n"),
            "a1": [Turn(calls=(call("write_file", path="notes.txt", content="a1 was here\n"),))],
        })  # fmt: skip
        handle = await start_run(
            self.team, "t", models=models, tools=self.tools, store=self.store, run_id="run-1"
        )
        assert isinstance(await asyncio.wait_for(handle.outcome(), timeout=20), Parked)
        [request] = await self.service.pending(run_id="run-1")
        await self.service.decide(request.id, APPROVER, approve=True)

    async def finish_on_machine_2(self, tmp_path: Path) -> RunFinished:
        shutil.rmtree(self.root)  # machine 1 is gone, and its disk with it
        self.root = tmp_path / "machine-2"
        handle = await resume_run("run-1", self.team, self.store, models=ScriptedModels(), tools=self.tools)
        outcome = await asyncio.wait_for(handle.outcome(), timeout=20)
        assert isinstance(outcome, RunFinished), outcome
        return outcome


async def test_a_run_resumed_on_another_machine_has_its_agents_files(
    tmp_path: Path, engine: AsyncEngine
) -> None:
    machines = Machines(tmp_path, engine)
    await machines.parked_on_machine_1()
    outcome = await machines.finish_on_machine_2(tmp_path)

    assert outcome.winner in ("a0", "a1")
    assert outcome.patch is not None
    assert f"+{outcome.winner} was here" in outcome.patch  # written on machine 1, before the takeover
    if outcome.winner == "a0":
        assert "checked.txt" in outcome.patch  # and the approved command ran on machine 2
    events = await machines.store.events("run-1")
    assert not [e for e in events if isinstance(e, WorkspaceRebuilt)]
    assert await machines.snapshots.load("run-1") == {}  # the run ended: its manifests went


async def test_over_the_limit_the_takeover_records_a_notice_and_rebuilds(
    tmp_path: Path, engine: AsyncEngine
) -> None:
    machines = Machines(tmp_path, engine, SnapshotLimits(file_bytes=8))  # "a0 was here\n" is 12 bytes
    await machines.parked_on_machine_1()
    outcome = await machines.finish_on_machine_2(tmp_path)

    events = await machines.store.events("run-1")
    notices = [e for e in events if isinstance(e, WorkspaceRebuilt)]
    assert {n.agent_id for n in notices} == {"a0", "a1"}
    assert all("per-file limit" in n.reason for n in notices)
    assert {agent for agent, _ in RunView.of(events).rebuilt} == {"a0", "a1"}  # what Slack's final post says
    assert "was here" not in (outcome.patch or "")
