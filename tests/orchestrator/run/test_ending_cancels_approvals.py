"""Issue 8: a run that ends (cancel, Finish now, timeout) while an approval is pending cancels it.

The real runner, the real toolbox and the real `ApprovalService` over SQLite: the request is cancelled
with the ending as its reason, the audit says so, it leaves the pending list, the service announces
it, and a later click is refused with a typed `AlreadyCancelled` that changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from approvals import (
    AlreadyCancelled,
    ApprovalEvent,
    ApprovalService,
    Principal,
    SqlApprovalStore,
    SqlAuditLog,
    create_schema,
    make_engine,
)
from approvals.permissions import PermissionConfig
from orchestrator import RunContext, RunTools, TeamConfig, build_run_tools, start_run
from orchestrator.testing import ScriptedModels, Turn, call, ended, hang, scripted_team
from tests.orchestrator.tools.fakes import ASK, ScriptedEngine

APPROVER = Principal(id="U_APPROVER")
COMMAND = "frobnicate --all"


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ApprovalService]:
    engine = make_engine(f"sqlite:///{tmp_path / 'approvals.db'}")
    await create_schema(engine)
    yield ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine), poll_interval=0.01)
    await engine.dispose()


def _team(timeout_seconds: float) -> TeamConfig:
    team = scripted_team(2, timeout_seconds=timeout_seconds)
    approvals = team.approvals.model_copy(update={"approvers": [APPROVER.id]})
    return team.model_copy(update={"sandbox": "none", "approvals": approvals})


async def _run_until_asked(
    service: ApprovalService, tmp_path: Path, *, timeout_seconds: float = 60.0
) -> tuple[Any, list[ApprovalEvent]]:
    events: list[ApprovalEvent] = []
    asked = asyncio.Event()

    def record(event: ApprovalEvent) -> None:
        events.append(event)
        if event.kind == "approval_requested":
            asked.set()

    service.subscribe(record)

    async def tools(ctx: RunContext) -> RunTools:
        def engine(_config: PermissionConfig) -> ScriptedEngine:
            return ScriptedEngine({COMMAND: ASK})

        return await build_run_tools(ctx, approvals=service, root=tmp_path / "ws", engine_factory=engine)

    models = ScriptedModels({"a0": [Turn(calls=(call("run_command", command=COMMAND),))], "a1": [hang()]})
    handle = await start_run(
        _team(timeout_seconds), "t", models=models, tools=tools, requester="U_REQ", run_id="run-1"
    )
    await asyncio.wait_for(asked.wait(), timeout=10)
    return handle, events


ENDINGS = [
    ("cancel", "the run was cancelled by U_BOSS"),
    ("finish_now", "the run was finished early by U_BOSS"),
    ("timeout", "the run timed out"),
]


@pytest.mark.parametrize(("ending", "reason"), ENDINGS, ids=[e for e, _ in ENDINGS])
async def test_a_run_that_ends_cancels_its_pending_approval(
    service: ApprovalService, tmp_path: Path, ending: str, reason: str
) -> None:
    handle, events = await _run_until_asked(
        service, tmp_path, timeout_seconds=3.0 if ending == "timeout" else 60.0
    )
    [request] = await service.pending(run_id="run-1")
    if ending == "cancel":
        await handle.cancel(by="U_BOSS")
    elif ending == "finish_now":
        await handle.finish_now(by="U_BOSS")
    await asyncio.wait_for(ended(handle), timeout=20)

    after = await service.get(request.id)
    assert after is not None
    assert (after.status, after.decision_reason) == ("cancelled", reason)
    assert await service.pending(run_id="run-1") == []
    assert await service.pending() == []
    trail = [(e.outcome, e.reason) for e in await service.audit_trail(run_id="run-1") if e.request_id]
    assert trail == [("ask", "medium risk"), ("cancelled", reason)]
    assert [e.kind for e in events if e.kind != "approval_requested"] == ["approval_cancelled"]

    late = await service.decide(request.id, APPROVER, approve=True)
    assert late == AlreadyCancelled(request=after)
    assert await service.get(request.id) == after  # nothing changed
    trail = [(e.outcome, e.reason) for e in await service.audit_trail(run_id="run-1") if e.request_id]
    assert trail[-1] == ("rejected", f"already cancelled: {reason}")
