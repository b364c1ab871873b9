"""The permission gate against the real approval service: audit, ask/park/resume, grants, deferral."""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from approvals.models import Principal
from approvals.permissions import Action, Decision
from approvals.service import ApprovalService
from approvals.testing import FrozenClock
from orchestrator.errors import ToolParked
from orchestrator.events import GrantAdded
from orchestrator.ports import ApprovalPort
from orchestrator.tools.gate import DEFERRED, GateCall
from tests.orchestrator.tools.fakes import ALLOW, ASK, DENY, EGRESS, PUSH, Harness, ScriptedEngine, parks

APPROVER = Principal(id="U_APPROVER")


def _call(target: str, *, agent: str = "alpha", phase: str = "coordination", digest: str = "d1") -> GateCall:
    return GateCall(
        agent_id=agent,
        tool="run_command",
        actions=(Action(kind="command", target=target),),
        digest=digest,
        phase=phase,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("method", ["request", "wait", "get", "record_decision"])
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


async def test_an_ask_parks_the_call_and_its_decision_answers_the_resumed_call() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"make deploy": ASK})
    request_id = await parks(gate, engine, _call("make deploy"))
    request = await harness.next_request()
    assert request.id == request_id
    # While alpha is parked, beta's allowed calls complete.
    others = [await gate.check(engine, _call("ls", agent="beta")) for _ in range(3)]
    assert all(r.allowed for r in others)
    assert request.digest == "d1"
    assert request.context["agent_id"] == "alpha"
    await harness.service.decide(request.id, APPROVER, approve=True)
    result = await gate.check(engine, _call("make deploy"), awaiting=request_id)
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
    gate, engine = harness.gate(), ScriptedEngine({"x": ASK})
    request_id = await parks(gate, engine, _call("x"))
    await harness.service.decide(request_id, APPROVER, approve=False, reason=reason)
    result = await gate.check(engine, _call("x"), awaiting=request_id)
    assert not result.allowed
    assert result.reason == expected


async def test_an_unanswered_ask_expires_as_a_denial() -> None:
    clock = FrozenClock(datetime.now(UTC))
    harness = Harness(clock=clock)
    gate, engine = harness.gate(timeout=timedelta(minutes=1)), ScriptedEngine({"x": ASK})
    request_id = await parks(gate, engine, _call("x"))
    clock.advance(timedelta(minutes=2))
    assert (
        await parks(gate, engine, _call("x"), awaiting=request_id) == request_id
    )  # overdue, not expired yet
    assert [r.id for r in await harness.service.expire_due()] == [request_id]
    result = await gate.check(engine, _call("x"), awaiting=request_id)
    assert not result.allowed
    assert "expired" in result.reason
    assert harness.events[-1].kind == "tool_approval_resolved"


async def test_run_scope_lets_the_same_action_through_for_every_agent() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"make test": ASK, "make deploy": ASK})
    asked = await parks(gate, engine, _call("make test"))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True, scope="run")
    assert (await gate.check(engine, _call("make test"), awaiting=asked)).allowed
    again = await gate.check(engine, _call("make test", agent="beta", digest="d2"))
    assert again.allowed
    assert again.request is None  # no second ask
    assert harness.requested.empty()
    # Another action still asks.
    other = await parks(gate, engine, _call("make deploy"))
    request = await harness.next_request()
    assert request.action == Action(kind="command", target="make deploy")
    await harness.service.decide(request.id, APPROVER, approve=False)
    assert not (await gate.check(engine, _call("make deploy"), awaiting=other)).allowed


async def test_once_scope_asks_again() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"make test": ASK})
    asked = []
    for _ in range(2):
        asked.append(await parks(gate, engine, _call("make test")))
        await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
        assert (await gate.check(engine, _call("make test"), awaiting=asked[-1])).allowed
    assert asked[0] != asked[1]


async def test_side_effects_are_deferred_during_coordination_and_done_once_in_final() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"git push origin main": PUSH})
    for agent in ("alpha", "beta", "gamma"):
        result = await gate.check(engine, _call("git push origin main", agent=agent))
        assert not result.allowed
        assert result.deferred
        assert result.reason == DEFERRED
    assert harness.requested.empty()  # nobody was asked three times
    push = _call("git push origin main", phase="final")
    final = await parks(gate, engine, push)
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
    assert (await gate.check(engine, push, awaiting=final)).allowed
    late = await gate.check(engine, _call("git push origin main", agent="beta", phase="final"))
    assert not late.allowed
    assert "performed by alpha only" in late.reason
    deferrals = [e for e in harness.audit.entries if e.reason == DEFERRED]
    assert [(e.outcome, e.layer) for e in deferrals] == [("deny", "policy")] * 3


async def test_network_is_granted_only_with_an_allowed_egress_decision() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"curl x": EGRESS})
    asked = await parks(gate, engine, _call("curl x"))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
    assert (await gate.check(engine, _call("curl x"), awaiting=asked)).network
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
        """Relays to the real service but reports a decided request with another digest."""

        async def request(self, ask):  # type: ignore[no-untyped-def]
            return await harness.service.request(ask)

        async def cancel_run(self, run_id: str, reason: str) -> int:
            return await harness.service.cancel_run(run_id, reason)

        async def always_rules(self) -> list[str]:
            return await harness.service.always_rules()

        async def wait(self, request_id: str):  # type: ignore[no-untyped-def]
            return await harness.service.wait(request_id)

        async def get(self, request_id: str):  # type: ignore[no-untyped-def]
            request = await harness.service.get(request_id)
            if request is None or request.status == "pending":
                return request
            return replace(request, digest="something-else")

        async def record_decision(self, entry):  # type: ignore[no-untyped-def]
            await harness.service.record_decision(entry)

    gate, engine = harness.gate(approvals=SwappingPort()), ScriptedEngine({"x": ASK})
    asked = await parks(gate, engine, _call("x"))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
    again = await parks(gate, engine, _call("x"), awaiting=asked)  # not its approval: it asks for itself
    assert again != asked
    assert [r.id for r in await harness.service.pending()] == [again]


async def test_identical_concurrent_asks_make_one_request_and_a_run_grant_frees_all() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"pip install x": ASK})
    calls = [_call("pip install x", agent=a, digest=a) for a in ("alpha", "beta", "gamma")]
    parked = await asyncio.wait_for(asyncio.gather(*(parks(gate, engine, c) for c in calls)), timeout=5)
    request = await harness.next_request()
    assert parked == [request.id] * 3
    await harness.service.decide(request.id, APPROVER, approve=True, scope="run")
    results = [await gate.check(engine, c, awaiting=request.id) for c in calls]
    assert all(r.allowed for r in results)
    assert harness.requested.empty()
    assert len(await harness.service.pending()) == 0
    assert sum(1 for e in harness.audit.entries if e.outcome == "ask") == 1


async def test_a_run_approval_given_while_a_follower_is_judged_lets_it_through() -> None:
    """The follower's verdict was computed before the grant: it is judged again, never asked anew."""
    judging, release = threading.Event(), threading.Event()

    class HeldForBeta(ScriptedEngine):
        """Holds beta's judgment (in its thread) until the test has approved alpha's ask for the run."""

        def evaluate_many(self, actions, *, grants=frozenset()):  # type: ignore[no-untyped-def]
            decision = super().evaluate_many(actions, grants=grants)
            if actions[0].target == "pip install x" and not grants and len(self.seen) == 2:
                judging.set()
                assert release.wait(timeout=5)
            return decision

    harness = Harness()
    gate, engine = harness.gate(), HeldForBeta({"pip install x": ASK})
    alpha = _call("pip install x", agent="alpha", digest="a")
    asked = await parks(gate, engine, alpha)
    request = await harness.next_request()
    beta = asyncio.create_task(gate.check(engine, _call("pip install x", agent="beta", digest="b")))
    assert await asyncio.to_thread(judging.wait, 5)
    await harness.service.decide(request.id, APPROVER, approve=True, scope="run")
    # The grant takes effect while beta is judged (alpha's resume would judge too, so it waits its
    # turn behind beta: the grant arrives as a resumed process takes it back, from the request).
    grant = GrantAdded(
        agent_id="alpha", request_id=asked, scope_keys=("command(pip install x)",), by=APPROVER.id
    )
    assert await gate.restore_grants([grant]) == 1
    release.set()  # beta's stale verdict (ask) arrives after the grant
    assert (await asyncio.wait_for(beta, timeout=5)).allowed
    assert (await gate.check(engine, alpha, awaiting=asked)).allowed
    assert harness.requested.empty()  # no second approval message for the same action
    assert sum(1 for e in harness.audit.entries if e.outcome == "ask") == 1


async def test_a_once_approval_does_not_propagate_to_parked_agents() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"pip install x": ASK})
    alpha, beta = (_call("pip install x", agent=a, digest=a) for a in ("alpha", "beta"))
    first_id = await parks(gate, engine, alpha)
    assert await parks(gate, engine, beta) == first_id  # beta parks on alpha's request
    first = await harness.next_request()
    await harness.service.decide(first.id, APPROVER, approve=True)  # once
    assert (await gate.check(engine, alpha, awaiting=first_id)).allowed
    second_id = await parks(gate, engine, beta, awaiting=first_id)  # the follower asks for itself
    second = await harness.next_request()
    assert second.id == second_id != first.id
    assert (first.agent_id, second.agent_id) == ("alpha", "beta")
    await harness.service.decide(second.id, APPROVER, approve=False)
    assert not (await gate.check(engine, beta, awaiting=second_id)).allowed


# ---- an ask ends the call; the stored decision answers the resumed call (issue 11) ----


async def test_an_ask_opens_the_request_and_parks_identical_asks_on_it() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"pip install x": ASK})
    with pytest.raises(ToolParked) as first:
        await gate.check(engine, _call("pip install x", agent="alpha", digest="alpha"))
    with pytest.raises(ToolParked) as second:
        await gate.check(engine, _call("pip install x", agent="beta", digest="beta"))
    [request] = await harness.service.pending()
    assert first.value.request_id == second.value.request_id == request.id
    assert harness.kinds()[-1] == "agent_status"  # awaiting approval, nothing resolved


async def test_a_resumed_call_is_answered_by_its_stored_decision() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"pip install x": ASK})
    call = _call("pip install x")
    with pytest.raises(ToolParked) as parked:
        await gate.check(engine, call)
    request_id = parked.value.request_id
    with pytest.raises(ToolParked):  # still pending: parked again, nothing asked twice
        await gate.check(engine, call, awaiting=request_id)
    assert len(await harness.service.pending()) == 1
    await harness.service.decide(request_id, APPROVER, approve=True)
    result = await gate.check(engine, call, awaiting=request_id)
    assert result.allowed
    assert result.request is not None
    assert result.request.id == request_id
    assert "tool_approval_resolved" in harness.kinds()


async def test_a_resumed_call_with_an_unknown_request_or_another_input_is_denied() -> None:
    harness = Harness()
    gate, engine = harness.gate(), ScriptedEngine({"pip install x": ASK})
    unknown = await gate.check(engine, _call("pip install x"), awaiting="apr_nope")
    assert not unknown.allowed
    assert "unknown" in unknown.reason
    with pytest.raises(ToolParked) as parked:
        await gate.check(engine, _call("pip install x", digest="d1"))
    await harness.service.decide(parked.value.request_id, APPROVER, approve=True)
    # The same request id offered for a call with another input: it is not this call's approval.
    with pytest.raises(ToolParked):  # so the call asks for itself
        await gate.check(engine, _call("pip install x", digest="d2"), awaiting=parked.value.request_id)
    assert len(await harness.service.pending()) == 1


async def test_a_resumed_call_the_policy_now_denies_is_denied_despite_its_approval() -> None:
    harness = Harness()
    gate = harness.gate()
    with pytest.raises(ToolParked) as parked:
        await gate.check(ScriptedEngine({"pip install x": ASK}), _call("pip install x"))
    await harness.service.decide(parked.value.request_id, APPROVER, approve=True)
    result = await gate.check(
        ScriptedEngine({"pip install x": DENY}), _call("pip install x"), awaiting=parked.value.request_id
    )
    assert not result.allowed
