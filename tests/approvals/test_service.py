"""ApprovalService over the in-memory store and a frozen clock: asks, decisions, audit, events."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from approvals.audit import AuditEntry
from approvals.errors import ApprovalMisuseError, ApprovalNotFoundError
from approvals.events import ApprovalEvent, DecisionRejected
from approvals.models import (
    AlreadyCancelled,
    AlreadyDecided,
    ApprovalRequest,
    Approvers,
    Ask,
    ConversationRef,
    Decided,
    NotAuthorised,
    NotFound,
    Principal,
    QuorumPending,
    ScopeNotOffered,
)
from approvals.permissions import Action, Decision, Risk, action_digest
from approvals.service import ApprovalService
from approvals.testing import EPOCH, FrozenClock, InMemoryApprovalStore, InMemoryAuditLog, ask_decision

APPROVERS = Approvers(users=frozenset({"U_A", "U_B", "U_REQ"}), groups=frozenset({"S_OPS"}))
ALICE = Principal(id="U_A")
BOB = Principal(id="U_B")
ACTION = Action(kind="command", target="make test")
DIGEST = action_digest("shell", {"command": "make test"})


class Harness:
    def __init__(self) -> None:
        self.clock = FrozenClock()
        self.store = InMemoryApprovalStore()
        self.audit = InMemoryAuditLog()
        self.service = ApprovalService(self.store, self.audit, self.clock, poll_interval=0.01)
        self.events: list[ApprovalEvent] = []
        self.service.subscribe(self.events.append)

    async def ask(self, **overrides: Any) -> ApprovalRequest:
        arguments: dict[str, Any] = {
            "run_id": "run-1",
            "agent_id": "agent1",
            "requester": "U_REQ",
            "action": ACTION,
            "digest": DIGEST,
            "decision": ask_decision(always_offerable=True),
            "approvers": APPROVERS,
            "timeout": timedelta(minutes=5),
            "context": {"input": "make test"},
            "conversation": ConversationRef(surface="slack", channel="C1", thread="1.2"),
        }
        arguments.update(overrides)
        return await self.service.request(Ask(**arguments))

    async def stored(self, request_id: str) -> ApprovalRequest:
        found = await self.service.get(request_id)
        assert found is not None
        return found

    def outcomes(self) -> list[tuple[str, str]]:
        return [(e.outcome, e.actor) for e in self.audit.entries]

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


def request_id(event: ApprovalEvent) -> str:
    return event.request_id if isinstance(event, DecisionRejected) else event.request.id


@pytest.fixture
def h() -> Harness:
    return Harness()


async def test_request_is_stored_audited_and_announced(h: Harness) -> None:
    request = await h.ask()
    assert await h.service.get(request.id) == request
    assert (request.status, request.digest, request.scopes) == ("pending", DIGEST, ("once", "run", "always"))
    assert request.expires_at - request.created_at == timedelta(minutes=5)
    assert dict(request.context) == {"input": "make test"}
    assert request.conversation == ConversationRef(surface="slack", channel="C1", thread="1.2")
    assert len(request.id) >= 24
    assert len(request.nonce) >= 32
    assert h.outcomes() == [("ask", "engine")]
    assert h.kinds() == ["approval_requested"]


async def test_ids_and_nonces_are_unique(h: Harness) -> None:
    requests = [await h.ask() for _ in range(20)]
    assert len({r.id for r in requests}) == len({r.nonce for r in requests}) == 20
    # An id starting with "-" would read as an option to `massgen-bot approvals approve ID`.
    assert all(r.id.startswith("apr_") for r in requests)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {
                "decision": Decision(
                    verdict="deny", resolved="deny", risk="critical", layer="floor", reason="x"
                )
            },
            "ask",
        ),
        (
            {"decision": Decision(verdict="ask", resolved="allow", risk="low", layer="risk", reason="x")},
            "ask",
        ),
        ({"approvers": Approvers()}, "no approvers"),
        ({"approvers": Approvers(users=frozenset({"U_A"}), quorum=2)}, "quorum"),
        ({"approvers": replace(APPROVERS, quorum=0)}, "quorum"),
        ({"timeout": timedelta(0)}, "timeout"),
        ({"timeout": timedelta(seconds=-1)}, "timeout"),
        ({"digest": ""}, "digest"),
    ],
)
async def test_bad_requests_fail_closed_and_store_nothing(
    h: Harness, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ApprovalMisuseError, match=message):
        await h.ask(**overrides)
    assert await h.service.pending() == []
    assert (h.audit.entries, h.events) == ([], [])


async def test_first_decision_wins_and_later_ones_change_nothing(h: Harness) -> None:
    request = await h.ask()
    won = await h.service.decide(request.id, ALICE, approve=True, reason="lgtm")
    assert isinstance(won, Decided)
    assert (won.request.status, won.request.decided_by, won.request.decision_scope) == (
        "approved",
        "U_A",
        "once",
    )
    for principal, approve in ((ALICE, True), (BOB, False)):
        late = await h.service.decide(request.id, principal, approve=approve)
        assert late == AlreadyDecided(request=won.request)
    assert await h.service.get(request.id) == won.request
    assert h.outcomes() == [("ask", "engine"), ("approved", "U_A"), ("rejected", "U_A"), ("rejected", "U_B")]
    assert h.kinds() == ["approval_requested", "approval_decided", "decision_rejected", "decision_rejected"]


async def test_deny_records_reason(h: Harness) -> None:
    request = await h.ask()
    result = await h.service.decide(request.id, BOB, approve=False, reason="not on a Friday")
    assert isinstance(result, Decided)
    assert (result.request.status, result.request.decision_reason) == ("denied", "not on a Friday")
    assert h.audit.entries[-1].reason == "not on a Friday"


@pytest.mark.parametrize(
    ("principal", "why"),
    [
        (Principal(id="U_EVE"), "not an approver"),
        (Principal(id="U_EVE", groups=frozenset({"S_DEV"})), "not an approver"),
        (Principal(id="U_REQ"), "requester may not approve"),
    ],
)
async def test_unauthorised_attempts_are_refused_audited_and_announced(
    h: Harness, principal: Principal, why: str
) -> None:
    request = await h.ask()
    result = await h.service.decide(request.id, principal, approve=True)
    assert isinstance(result, NotAuthorised)
    assert why in result.why
    assert (await h.service.get(request.id)) == request
    assert h.outcomes()[-1] == ("rejected", principal.id)
    assert h.events[-1].kind == "decision_rejected"


async def test_group_membership_authorises(h: Harness) -> None:
    request = await h.ask()
    result = await h.service.decide(
        request.id, Principal(id="U_OPS", groups=frozenset({"S_OPS"})), approve=True
    )
    assert isinstance(result, Decided)
    assert result.request.decided_by == "U_OPS"


async def test_self_approval_when_configured(h: Harness) -> None:
    request = await h.ask(approvers=replace(APPROVERS, allow_self_approval=True))
    assert isinstance(await h.service.decide(request.id, Principal(id="U_REQ"), approve=True), Decided)


async def test_quorum_with_veto(h: Harness) -> None:
    request = await h.ask(approvers=replace(APPROVERS, quorum=2))
    first = await h.service.decide(request.id, ALICE, approve=True)
    assert isinstance(first, QuorumPending)
    assert (first.approvals, first.needed) == (1, 2)
    assert isinstance(await h.service.decide(request.id, ALICE, approve=True), AlreadyDecided)
    veto = await h.service.decide(request.id, BOB, approve=False, reason="no")
    assert isinstance(veto, Decided)
    assert veto.request.status == "denied"
    assert [o for o, _ in h.outcomes()] == ["ask", "vote", "rejected", "denied"]


async def test_quorum_reached(h: Harness) -> None:
    request = await h.ask(approvers=replace(APPROVERS, quorum=2))
    await h.service.decide(request.id, ALICE, approve=True, scope="always")
    done = await h.service.decide(request.id, BOB, approve=True, scope="run")
    assert isinstance(done, Decided)
    assert (done.request.status, done.request.approvals_so_far, done.request.decision_scope) == (
        "approved",
        ("U_A", "U_B"),
        "run",
    )
    assert await h.service.always_rules() == []


async def test_always_persists_an_allow_rule(h: Harness) -> None:
    request = await h.ask()
    result = await h.service.decide(request.id, ALICE, approve=True, scope="always")
    assert isinstance(result, Decided)
    assert await h.service.always_rules() == ["command(make test)"]
    assert h.audit.entries[-1].scope == "always"


@pytest.mark.parametrize("risk", ["high", "critical"])
async def test_always_is_refused_when_not_offered(h: Harness, risk: Risk) -> None:
    request = await h.ask(decision=ask_decision(risk=risk, always_offerable=True))
    result = await h.service.decide(request.id, ALICE, approve=True, scope="always")
    assert result == ScopeNotOffered(request=request, scope="always")
    assert await h.service.always_rules() == []
    assert (await h.service.get(request.id)) == request
    assert h.outcomes()[-1] == ("rejected", "U_A")


async def test_unknown_id_is_not_found_and_audited(h: Harness) -> None:
    assert await h.service.decide("guess", ALICE, approve=True) == NotFound(request_id="guess")
    assert h.audit.entries[-1].request_id == "guess"
    assert h.audit.entries[-1].outcome == "rejected"


async def test_a_late_click_expires_the_request_instead_of_approving(h: Harness) -> None:
    request = await h.ask()
    h.clock.advance(timedelta(minutes=5))
    result = await h.service.decide(request.id, ALICE, approve=True)
    assert isinstance(result, AlreadyDecided)
    assert result.request.status == "expired"
    assert h.kinds()[-2:] == ["approval_expired", "decision_rejected"]
    assert [o for o, _ in h.outcomes()] == ["ask", "expired", "rejected"]


async def test_wait_wakes_on_an_in_process_decision(h: Harness) -> None:
    h.service = ApprovalService(h.store, h.audit, h.clock, poll_interval=60)  # polling cannot help
    request = await h.ask()
    waiter = asyncio.create_task(h.service.wait(request.id))
    await asyncio.sleep(0)
    await h.service.decide(request.id, ALICE, approve=True)
    done = await asyncio.wait_for(waiter, 5)
    assert done.status == "approved"


async def test_every_waiter_wakes(h: Harness) -> None:
    h.service = ApprovalService(h.store, h.audit, h.clock, poll_interval=60)  # polling cannot help
    request = await h.ask()
    waiters = [asyncio.create_task(h.service.wait(request.id)) for _ in range(3)]
    await asyncio.sleep(0)
    await h.service.decide(request.id, BOB, approve=True)
    done = await asyncio.wait_for(asyncio.gather(*waiters), 5)
    assert [r.status for r in done] == ["approved"] * 3


async def test_wait_sees_a_decision_made_by_another_service_instance(h: Harness) -> None:
    request = await h.ask()
    other = ApprovalService(h.store, h.audit, h.clock)  # e.g. the CLI in another process
    waiter = asyncio.create_task(h.service.wait(request.id))
    await asyncio.sleep(0)
    await other.decide(request.id, BOB, approve=False, reason="no")
    done = await asyncio.wait_for(waiter, 5)
    assert (done.status, done.decided_by) == ("denied", "U_B")


async def test_wait_expires_an_overdue_request(h: Harness) -> None:
    request = await h.ask()
    h.clock.advance(timedelta(minutes=6))
    done = await asyncio.wait_for(h.service.wait(request.id), 5)
    assert done.status == "expired"
    assert "approval_expired" in h.kinds()


async def test_wait_on_unknown_id_raises(h: Harness) -> None:
    with pytest.raises(ApprovalNotFoundError):
        await h.service.wait("nope")


async def test_pending_filters_by_run_and_principal(h: Harness) -> None:
    a = await h.ask(run_id="r1")
    h.clock.advance(timedelta(seconds=1))  # pending() lists oldest first
    b = await h.ask(run_id="r2", approvers=Approvers(users=frozenset({"U_B"})))
    assert [r.id for r in await h.service.pending()] == [a.id, b.id]
    assert [r.id for r in await h.service.pending(run_id="r2")] == [b.id]
    assert [r.id for r in await h.service.pending(principal=ALICE)] == [a.id]
    assert [
        r.id for r in await h.service.pending(principal=Principal(id="U_X", groups=frozenset({"S_OPS"})))
    ] == [a.id]


async def test_cancel_run_cancels_only_that_runs_pending_requests(h: Harness) -> None:
    a = await h.ask(run_id="r1")
    b = await h.ask(run_id="r1")
    c = await h.ask(run_id="r2")
    await h.service.decide(b.id, ALICE, approve=True)
    assert await h.service.cancel_run("r1") == 1
    assert [(await h.stored(x.id)).status for x in (a, b, c)] == ["cancelled", "approved", "pending"]
    assert await h.service.cancel_run("r1") == 0
    assert h.kinds().count("approval_cancelled") == 1


async def test_a_decision_on_a_cancelled_request_is_refused_and_changes_nothing(h: Harness) -> None:
    request = await h.ask(run_id="r1")
    waiting = asyncio.create_task(h.service.wait(request.id))
    assert await h.service.cancel_run("r1", "the run was finished early by U_REQ") == 1
    cancelled = await asyncio.wait_for(waiting, timeout=5)  # the waiter wakes at once
    assert (cancelled.status, cancelled.decision_reason) == (
        "cancelled",
        "the run was finished early by U_REQ",
    )
    assert await h.service.pending() == []
    result = await h.service.decide(request.id, ALICE, approve=True)
    assert result == AlreadyCancelled(request=cancelled)
    assert await h.service.get(request.id) == cancelled
    assert h.outcomes()[-2:] == [("cancelled", "engine"), ("rejected", ALICE.id)]
    assert h.audit.entries[-1].reason == "already cancelled: the run was finished early by U_REQ"
    assert h.kinds()[-2:] == ["approval_cancelled", "decision_rejected"]


async def test_expire_due_and_remind_due(h: Harness) -> None:
    short = await h.ask(timeout=timedelta(minutes=3))
    long = await h.ask(timeout=timedelta(minutes=10))
    brief = await h.ask(timeout=timedelta(minutes=1))  # shorter than the reminder lead: never reminded
    within = timedelta(minutes=2)
    assert await h.service.remind_due(within=within) == []  # short still has 3 minutes
    h.clock.advance(timedelta(seconds=70))
    assert [r.id for r in await h.service.expire_due()] == [brief.id]
    assert [r.id for r in await h.service.remind_due(within=within)] == [short.id]
    assert await h.service.remind_due(within=within) == []  # only once
    h.clock.advance(timedelta(minutes=2))
    assert [r.id for r in await h.service.expire_due()] == [short.id]
    assert await h.service.expire_due() == []
    assert (await h.stored(long.id)).status == "pending"
    assert [(e.kind, request_id(e)) for e in h.events if e.kind != "approval_requested"] == [
        ("approval_expired", brief.id),
        ("approval_reminder", short.id),
        ("approval_expired", short.id),
    ]


async def test_failing_subscriber_does_not_break_decisions(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_event: ApprovalEvent) -> None:
        raise RuntimeError("renderer down")

    async def recorder(event: ApprovalEvent) -> None:
        seen.append(event.kind)

    seen: list[str] = []
    h.service.subscribe(broken)
    unsubscribe = h.service.subscribe(recorder)
    request = await h.ask()
    unsubscribe()
    assert isinstance(await h.service.decide(request.id, ALICE, approve=True), Decided)
    assert seen == ["approval_requested"]
    assert "renderer down" in caplog.text


async def test_record_decision_appends_engine_verdicts(h: Harness) -> None:
    entry = AuditEntry(
        at=EPOCH,
        run_id="r",
        agent_id="a",
        actor="engine",
        action="command(ls)",
        outcome="allow",
        layer="rule",
    )
    await h.service.record_decision(entry)
    assert h.audit.entries == [entry]
