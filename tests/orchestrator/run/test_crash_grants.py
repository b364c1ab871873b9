"""An approval "for this run" survives `kill -9`: a new process does not ask again for the same scope.

Three processes on one SQLite file: the first parks on a0's command; the approver answers "for this
run"; the second runs it (storing the grant) and is killed at a0's next model reply, which repeats
the command; the third resumes. It runs the repeated command without asking, and asks for a
different one. An edited grant event is ignored: the third process then asks again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from approvals import (
    ApprovalRequest,
    ApprovalService,
    AuditEntry,
    Principal,
    SqlApprovalStore,
    SqlAuditLog,
    make_engine,
)
from orchestrator import SqlRunStore
from orchestrator.events import GrantAdded, RunEvent, ToolStarted
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply
from tests.orchestrator.run.crash_child import APPROVER, RUN_ID, command, other_command
from tests.orchestrator.run.test_crash import Scene, kill, line


def grant_handler(side: Path):  # type: ignore[no-untyped-def]
    """a0 (m0) runs `command`, then `command` again, then `other_command`; then the protocol."""

    def handler(request: ProviderRequest) -> Reply:
        if request.model == "m0" and "new_answer" in request.tools:
            made = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
            script = [command(side), command(side), other_command(side)]
            if made < len(script):
                return Reply(tool_calls=[("run_command", {"command": script[made]})])
        return protocol_agent(request)

    return handler


@pytest.fixture
async def scene(tmp_path: Path) -> AsyncIterator[Scene]:
    async with ProviderServer(grant_handler(tmp_path / "side.log")) as server:
        yield Scene(tmp_path, server)


async def held_at(scene: Scene, mode: str, point: str) -> str:
    """Run a child until it holds (at `point`, or parked), kill it, and return what it said."""
    proc = scene.child(mode, f"grant@{point}")
    try:
        return await line(proc)
    finally:
        await kill(proc)


async def granted_then_killed(scene: Scene) -> str:
    """Up to the second process's kill: the grant is stored, the repeated command is not started."""
    parked = await held_at(scene, "start", "none")
    assert parked.startswith("at parked apr_")
    request_id = parked.split()[-1]
    engine = make_engine(f"sqlite:///{scene.tmp / 'runs.db'}")
    try:
        service = ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine))
        await service.decide(request_id, Principal(id=APPROVER), approve=True, scope="run")
    finally:
        await engine.dispose()
    assert await held_at(scene, "resume", "model_call") == "at model_call"
    assert scene.ran() == 1  # the approved command ran; its repeat was held before it could start
    return request_id


async def stored(scene: Scene) -> tuple[list[RunEvent], list[ApprovalRequest], list[AuditEntry]]:
    """The run's events, its approval requests and its audit trail, as the database has them."""
    engine = make_engine(f"sqlite:///{scene.tmp / 'runs.db'}")
    try:
        events = await SqlRunStore(engine).events(RUN_ID)
        requests = await SqlApprovalStore(engine).query(run_id=RUN_ID)
        audit = await SqlAuditLog(engine).query(run_id=RUN_ID)
    finally:
        await engine.dispose()
    return events, requests, audit


async def test_a_run_grant_survives_a_kill_and_covers_only_its_scope(scene: Scene) -> None:
    first = await granted_then_killed(scene)
    parked = await held_at(scene, "resume", "none")  # the third process

    assert parked.startswith("at parked apr_")
    second = parked.split()[-1]
    assert second != first
    assert scene.ran() == 2  # the repeated command ran under the restored grant, once
    assert not Path(f"{scene.side}.other").exists()  # the other command waits for its own approval
    assert scene.opening_requests("m0") == 1  # no completed model call was made again
    events, requests, audit = await stored(scene)
    assert [(r.id, r.action.target) for r in requests] == [
        (first, command(scene.side)),
        (second, other_command(scene.side)),
    ]  # asked once for the granted scope, and once for the other one
    [grant] = [e for e in events if isinstance(e, GrantAdded)]
    assert grant.request_id == first
    assert grant.scope_keys == (f"command({command(scene.side)})",)
    # The grant and the approval service's audit say the same: who approved which request, for the run.
    [approved] = [a for a in audit if a.outcome == "approved"]
    assert (approved.request_id, approved.actor, approved.scope) == (first, APPROVER, grant.scope)
    assert grant.by == APPROVER
    started = [e for e in events if isinstance(e, ToolStarted)]
    assert [s.request_id for s in started] == [first, None]  # the repeat ran under the grant
    assert events.index(grant) < events.index(started[0])  # stored before it took effect


async def test_a_tampered_grant_event_is_ignored_and_the_action_is_asked_again(scene: Scene) -> None:
    """A grant widened in the log (the other edits: tests/orchestrator/tools/test_gate_grants.py)."""
    first = await granted_then_killed(scene)
    engine = make_engine(f"sqlite:///{scene.tmp / 'runs.db'}")
    try:
        async with engine.begin() as conn:
            query = text("SELECT seq, data FROM run_events WHERE run_id = :r")
            rows = (await conn.execute(query, {"r": RUN_ID})).all()
            [(seq, data)] = [(s, d) for s, d in rows if json.loads(d)["kind"] == "grant_added"]
            grant = json.loads(data)
            edited = {**grant, "scope_keys": [*grant["scope_keys"], f"command({other_command(scene.side)})"]}
            await conn.execute(
                text("UPDATE run_events SET data = :d WHERE run_id = :r AND seq = :s"),
                {"d": json.dumps(edited), "r": RUN_ID, "s": seq},
            )
    finally:
        await engine.dispose()

    parked = await held_at(scene, "resume", "none")
    assert parked.startswith("at parked apr_")
    assert scene.ran() == 1  # the repeated command did not run on the edited grant
    _, requests, _ = await stored(scene)
    assert [(r.id == first, r.action.target) for r in requests] == [
        (True, command(scene.side)),
        (False, command(scene.side)),  # asked again
    ]
