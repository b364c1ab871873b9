"""The permission gate against the real approval service: audit, ask/wait, grants, deferral."""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from approvals.models import Principal
from approvals.permissions.actions import Action
from approvals.permissions.decisions import Decision
from approvals.service import ApprovalService
from orchestrator.ports import ApprovalPort
from orchestrator.tools.gate import DEFERRED, GateCall
from tests.orchestrator.tools.fakes import ALLOW, ASK, DENY, EGRESS, PUSH, Harness, ScriptedEngine

APPROVER = Principal(id="U_APPROVER")


def _call(target: str, *, agent: str = "alpha", phase: str = "coordination", digest: str = "d1") -> GateCall:
    return GateCall(
        agent_id=agent,
        tool="run_command",
        actions=(Action(kind="command", target=target),),
        digest=digest,
        phase=phase,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("method", ["request", "wait", "record_decision"])
def test_the_approval_service_satisfies_the_port(method: str) -> None:
    # CI type-checks the packages, not the tests: compare the signatures at run time too.
    port, service = (
        inspect.signature(getattr(ApprovalPort, method)),
        inspect.signature(getattr(ApprovalService, method)),
    )
    assert list(port.parameters) == list(service.parameters)
    assert [p.kind for p in port.parameters.values()] == [p.kind for p in service.parameters.values()]


@pytest.mark.parametrize(
    ("decision", "allowed", "outcome"),
    [(ALLOW, True, "allow"), (DENY, False, "deny")],
)
async def test_allow_and_deny_are_audited_without_a_request(
    decision: Decision, allowed: bool, outcome: str
) -> None:
    harness = Harness()
    result = await harness.gate().check(ScriptedEngine({"ls": decision}), _call("ls"))
    assert result.allowed is allowed
    assert result.reason == decision.reason
    (entry,) = harness.audit.entries
    assert (entry.outcome, entry.actor, entry.action, entry.layer) == (
        outcome,
        "engine",
        "command(ls)",
        decision.layer,
    )
    assert await harness.service.pending() == []


async def test_ask_waits_for_a_human_while_other_work_goes_on() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"make deploy": ASK})
    waiting = asyncio.create_task(gate.check(engine, _call("make deploy")))
    request = await harness.next_request()
    # While alpha waits, beta's allowed calls complete.
    others = [await gate.check(engine, _call("ls", agent="beta")) for _ in range(3)]
    assert all(r.allowed for r in others)
    assert not waiting.done()
    assert request.digest == "d1"
    assert request.context["agent_id"] == "alpha"
    await harness.service.decide(request.id, APPROVER, approve=True)
    result = await asyncio.wait_for(waiting, timeout=5)
    assert result.allowed
    assert result.reason == "approved by U_APPROVER"
    assert harness.kinds() == [
        "tool_approval_requested",
        "agent_status",
        "agent_status",
        "tool_approval_resolved",
    ]
    assert [e.outcome for e in harness.audit.entries if e.request_id == request.id] == ["ask", "approved"]


@pytest.mark.parametrize(
    ("approve", "reason", "expected"),
    [
        (False, "not on a Friday", "denied by U_APPROVER: not on a Friday"),
        (False, None, "denied by U_APPROVER"),
    ],
)
async def test_a_denial_reason_comes_back(approve: bool, reason: str | None, expected: str) -> None:
    harness = Harness()
    waiting = asyncio.create_task(harness.gate().check(ScriptedEngine({"x": ASK}), _call("x")))
    request = await harness.next_request()
    await harness.service.decide(request.id, APPROVER, approve=False, reason=reason)
    result = await asyncio.wait_for(waiting, timeout=5)
    assert not result.allowed
    assert result.reason == expected


async def test_an_unanswered_ask_expires_as_a_denial() -> None:
    harness = Harness()
    gate = harness.gate(timeout=timedelta(milliseconds=50))
    result = await asyncio.wait_for(gate.check(ScriptedEngine({"x": ASK}), _call("x")), timeout=5)
    assert not result.allowed
    assert "expired" in result.reason
    assert harness.events[-1].kind == "tool_approval_resolved"


async def test_run_scope_lets_the_same_action_through_for_every_agent() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"make test": ASK, "make deploy": ASK})
    waiting = asyncio.create_task(gate.check(engine, _call("make test")))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True, scope="run")
    assert (await waiting).allowed
    again = await gate.check(engine, _call("make test", agent="beta", digest="d2"))
    assert again.allowed
    assert again.request is None  # no second ask
    assert harness.requested.empty()
    # Another action still asks.
    other = asyncio.create_task(gate.check(engine, _call("make deploy")))
    request = await harness.next_request()
    assert request.action == Action(kind="command", target="make deploy")
    await harness.service.decide(request.id, APPROVER, approve=False)
    assert not (await other).allowed


async def test_once_scope_asks_again() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"make test": ASK})
    for _ in range(2):
        waiting = asyncio.create_task(gate.check(engine, _call("make test")))
        await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
        assert (await waiting).allowed


async def test_side_effects_are_deferred_during_coordination_and_done_once_in_final() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"git push origin main": PUSH})
    for agent in ("alpha", "beta", "gamma"):
        result = await gate.check(engine, _call("git push origin main", agent=agent))
        assert not result.allowed
        assert result.deferred
        assert result.reason == DEFERRED
    assert harness.requested.empty()  # nobody was asked three times
    final = asyncio.create_task(gate.check(engine, _call("git push origin main", phase="final")))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
    assert (await final).allowed
    late = await gate.check(engine, _call("git push origin main", agent="beta", phase="final"))
    assert not late.allowed
    assert "performed by alpha only" in late.reason
    deferrals = [e for e in harness.audit.entries if e.reason == DEFERRED]
    assert [(e.outcome, e.layer) for e in deferrals] == [("deny", "policy")] * 3


async def test_network_is_granted_only_with_an_allowed_egress_decision() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"curl x": EGRESS})
    waiting = asyncio.create_task(gate.check(engine, _call("curl x")))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
    assert (await waiting).network
    assert not (await gate.check(engine, _call("ls"))).network


async def test_no_approvers_means_denied_not_allowed() -> None:
    harness = Harness(approvers=frozenset())
    result = await harness.gate().check(ScriptedEngine({"x": ASK}), _call("x"))
    assert not result.allowed
    assert "approval could not be requested" in result.reason
    assert harness.audit.entries[-1].outcome == "deny"


async def test_an_engine_failure_denies() -> None:
    class Broken(ScriptedEngine):
        def evaluate_many(self, actions, *, grants=frozenset()):  # type: ignore[no-untyped-def]
            raise RuntimeError("parser exploded")

    harness = Harness()
    result = await harness.gate().check(Broken(), _call("x"))
    assert not result.allowed
    assert "parser exploded" in result.reason


async def test_the_engine_judges_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    released = threading.Event()

    class Blocking(ScriptedEngine):
        """Blocks its thread until the loop (still free) releases it; on the loop it would deadlock."""

        def evaluate_many(self, actions, *, grants=frozenset()):  # type: ignore[no-untyped-def]
            assert threading.get_ident() != loop_thread
            assert released.wait(timeout=5), "the event loop was blocked by the judgment"
            return super().evaluate_many(actions, grants=grants)

    harness = Harness()
    judging = asyncio.create_task(harness.gate().check(Blocking(), _call("x")))
    await asyncio.sleep(0.01)
    released.set()  # runs only because the loop is not waiting on the engine
    result = await judging
    assert result.allowed


async def test_a_verdict_past_the_deadline_denies() -> None:
    released = threading.Event()

    class Slow(ScriptedEngine):
        def evaluate_many(self, actions, *, grants=frozenset()):  # type: ignore[no-untyped-def]
            released.wait(timeout=5)
            return super().evaluate_many(actions, grants=grants)

    harness = Harness()
    try:
        result = await harness.gate(judge_timeout=0.05).check(Slow(), _call("x"))
    finally:
        released.set()
    assert not result.allowed
    assert result.reason == "engine error: no verdict within 0.05 s"
    assert (result.decision.resolved, result.decision.risk) == ("deny", "critical")
    assert harness.audit.entries[-1].outcome == "deny"


async def test_an_approval_for_a_different_digest_is_not_honoured() -> None:
    harness = Harness()

    class SwappingPort:
        """Relays to the real service but reports the approved request with another digest."""

        async def request(self, ask):  # type: ignore[no-untyped-def]
            return await harness.service.request(ask)

        async def cancel_run(self, run_id: str, reason: str) -> int:
            return await harness.service.cancel_run(run_id, reason)

        async def always_rules(self) -> list[str]:
            return await harness.service.always_rules()

        async def wait(self, request_id: str):  # type: ignore[no-untyped-def]
            return replace(await harness.service.wait(request_id), digest="something-else")

        async def get(self, request_id: str):  # type: ignore[no-untyped-def]
            return await harness.service.get(request_id)

        async def record_decision(self, entry):  # type: ignore[no-untyped-def]
            await harness.service.record_decision(entry)

    gate = harness.gate(approvals=SwappingPort())
    waiting = asyncio.create_task(gate.check(ScriptedEngine({"x": ASK}), _call("x")))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
    result = await waiting
    assert not result.allowed
    assert "does not match this exact call" in result.reason


async def test_identical_concurrent_asks_make_one_request_and_a_run_grant_frees_all() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"pip install x": ASK})
    tasks = [
        asyncio.create_task(gate.check(engine, _call("pip install x", agent=a, digest=a)))
        for a in ("alpha", "beta", "gamma")
    ]
    request = await harness.next_request()
    await harness.service.decide(request.id, APPROVER, approve=True, scope="run")
    results = await asyncio.wait_for(asyncio.gather(*tasks), timeout=5)
    assert all(r.allowed for r in results)
    assert harness.requested.empty()
    assert len(await harness.service.pending()) == 0
    assert sum(1 for e in harness.audit.entries if e.outcome == "ask") == 1


async def test_a_once_approval_does_not_propagate_to_waiting_agents() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"pip install x": ASK})
    tasks = [
        asyncio.create_task(gate.check(engine, _call("pip install x", agent=a, digest=a)))
        for a in ("alpha", "beta")
    ]
    first = await harness.next_request()
    await harness.service.decide(first.id, APPROVER, approve=True)  # once
    second = await harness.next_request()  # the follower asks for itself
    assert second.id != first.id
    assert {first.agent_id, second.agent_id} == {"alpha", "beta"}
    await harness.service.decide(second.id, APPROVER, approve=False)
    results = await asyncio.wait_for(asyncio.gather(*tasks), timeout=5)
    assert sorted(r.allowed for r in results) == [False, True]
