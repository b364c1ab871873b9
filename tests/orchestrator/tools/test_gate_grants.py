"""Grants "for this run" as run events: stored before they take effect, restored only as confirmed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from approvals.models import Principal
from approvals.permissions import Action
from orchestrator.errors import ToolParked
from orchestrator.events import GrantAdded, RunEvent
from orchestrator.tools.gate import SCOPE_KEYS, GateCall, PermissionGate
from tests.orchestrator.tools.fakes import ASK, Harness, ScriptedEngine, parks

APPROVER = Principal(id="U_APPROVER")
KEY = "command(make test)"


def _call(target: str, *, agent: str = "alpha", digest: str = "d1") -> GateCall:
    return GateCall(
        agent_id=agent,
        tool="run_command",
        actions=(Action(kind="command", target=target),),
        digest=digest,
        phase="coordination",
    )


async def _granted(harness: Harness, gate: PermissionGate, engine: ScriptedEngine) -> GrantAdded:
    """`make test` approved "for this run"; the grant event the gate stored."""
    asked = await parks(gate, engine, _call("make test"))
    request = await harness.next_request()
    assert json.loads(request.context[SCOPE_KEYS]) == [KEY]  # the request records what it may grant
    await harness.service.decide(request.id, APPROVER, approve=True, scope="run")
    assert (await gate.check(engine, _call("make test"), awaiting=asked)).allowed
    return [e for e in harness.events if isinstance(e, GrantAdded)][-1]


async def test_a_run_approval_is_stored_as_a_grant_before_it_takes_effect() -> None:
    harness = Harness()
    stored: list[RunEvent] = []
    engine = ScriptedEngine({"make test": ASK})

    async def checkpoint(event: RunEvent) -> None:
        assert KEY not in gate.grants.keys  # not in effect before it is stored
        stored.append(event)
        await harness.emit(event)

    gate = harness.gate(checkpoint=checkpoint)
    grant = await _granted(harness, gate, engine)
    assert stored == [grant]
    assert [e for e in harness.events if isinstance(e, GrantAdded)] == [grant]
    assert (grant.agent_id, grant.scope_keys, grant.scope, grant.by) == ("alpha", (KEY,), "run", "U_APPROVER")
    [approved] = [e for e in harness.audit.entries if e.outcome == "approved"]
    assert (approved.request_id, approved.actor, approved.scope) == (grant.request_id, grant.by, grant.scope)


async def test_a_grant_that_cannot_be_stored_does_not_take_effect() -> None:
    harness = Harness()

    async def broken(event: RunEvent) -> None:
        raise OSError("disk full")

    gate, engine = harness.gate(checkpoint=broken), ScriptedEngine({"make test": ASK})
    asked = await parks(gate, engine, _call("make test"))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True, scope="run")
    assert (await gate.check(engine, _call("make test"), awaiting=asked)).allowed  # the approved call runs
    assert gate.grants.keys == set()  # but the next one asks again
    again = await parks(gate, engine, _call("make test", digest="d2"))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=False)
    assert not (await gate.check(engine, _call("make test", digest="d2"), awaiting=again)).allowed


async def test_a_once_approval_stores_no_grant() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"make test": ASK})
    asked = await parks(gate, engine, _call("make test"))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
    assert (await gate.check(engine, _call("make test"), awaiting=asked)).allowed
    assert not [e for e in harness.events if isinstance(e, GrantAdded)]


async def test_a_restored_grant_lets_the_same_scope_through_without_asking() -> None:
    harness = Harness()
    grant = await _granted(harness, harness.gate(), ScriptedEngine({"make test": ASK}))
    resumed = harness.gate()  # a new process: nothing in memory
    assert await resumed.restore_grants([grant]) == 1
    result = await resumed.check(ScriptedEngine({"make test": ASK}), _call("make test", digest="d9"))
    assert result.allowed
    assert result.request is None
    assert harness.requested.empty()


@pytest.mark.parametrize(
    "edit",
    [
        {"scope_keys": (KEY, "command(make deploy)")},  # widened
        {"scope_keys": ("command(make deploy)",)},  # moved
        {"scope_keys": ()},
        {"request_id": "apr_unknown"},
        {"by": "U_SOMEONE"},
        {"agent_id": "beta"},
        {"scope": "always"},
        {"run_id": "run1", "request_id": "apr_other_run"},
    ],
    ids=["widened", "moved", "empty", "unknown", "other-approver", "other-agent", "other-scope", "other-run"],
)
async def test_a_grant_its_request_does_not_confirm_changes_nothing(edit: dict[str, object]) -> None:
    harness = Harness()
    grant = await _granted(harness, harness.gate(), ScriptedEngine({"make test": ASK}))
    if edit.get("request_id") == "apr_other_run":  # a real request, approved for the run, of another run
        other = harness.gate()
        other.run_id = "run2"
        edit = {"request_id": (await _granted(harness, other, ScriptedEngine({"make test": ASK}))).request_id}
    resumed = harness.gate()
    assert await resumed.restore_grants([replace(grant, **edit)]) == 0  # type: ignore[arg-type]
    assert resumed.grants.keys == set()


async def test_a_denied_or_once_request_confirms_no_grant() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"make test": ASK})
    asked = await parks(gate, engine, _call("make test"))
    request = await harness.next_request()
    await harness.service.decide(request.id, APPROVER, approve=True)  # once
    assert (await gate.check(engine, _call("make test"), awaiting=asked)).allowed
    forged = GrantAdded(agent_id="alpha", request_id=request.id, scope_keys=(KEY,), by="U_APPROVER")
    assert await harness.gate().restore_grants([forged]) == 0


async def test_an_identical_parked_call_resumed_first_takes_the_run_grant_once() -> None:
    """Two agents parked on one request: whichever resumes first, nobody is asked again."""
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"make test": ASK})
    with pytest.raises(ToolParked) as parked:
        await gate.check(engine, _call("make test"))
    with pytest.raises(ToolParked):  # beta's identical call waits on alpha's request
        await gate.check(engine, _call("make test", agent="beta", digest="d2"))
    request = await harness.next_request()
    await harness.service.decide(parked.value.request_id, APPROVER, approve=True, scope="run")

    resumed = harness.gate()  # the run resumes in a new process; beta's task happens to go first
    beta = await resumed.check(engine, _call("make test", agent="beta", digest="d2"), awaiting=request.id)
    alpha = await resumed.check(engine, _call("make test"), awaiting=request.id)
    assert beta.allowed
    assert alpha.allowed
    assert harness.requested.empty()  # no second ask
    grants = [e for e in harness.events if isinstance(e, GrantAdded)]
    assert [(g.agent_id, g.request_id) for g in grants] == [("alpha", request.id)]  # stored once
