"""Decision listeners: every way a request ends calls them once, after the row is stored."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from approvals.models import ApprovalRequest, Decided, Principal
from approvals.service import ApprovalService
from tests.approvals.test_service import APPROVERS, Harness


def listen(service: ApprovalService, store_of: Harness) -> list[tuple[str, str, str]]:
    """Record (id, run id, status as stored when the listener ran) per call."""
    heard: list[tuple[str, str, str]] = []

    async def listener(request: ApprovalRequest) -> None:
        stored = await store_of.store.get(request.id)
        assert stored is not None
        heard.append((request.id, request.run_id, stored.status))

    service.add_decision_listener(listener)
    return heard


async def test_a_click_calls_the_listener_after_the_decision_is_stored() -> None:
    harness = Harness()
    heard = listen(harness.service, harness)
    request = await harness.ask()
    assert heard == []  # asking is no decision
    await harness.service.decide(request.id, Principal(id="U_A"), approve=True)
    assert heard == [(request.id, "run-1", "approved")]


async def test_a_denial_an_expiry_and_a_cancelled_run_each_call_it_once() -> None:
    harness = Harness()
    heard = listen(harness.service, harness)
    denied, expiring = await harness.ask(), await harness.ask()
    await harness.service.decide(denied.id, Principal(id="U_B"), approve=False, reason="no")
    harness.clock.advance(timedelta(minutes=6))
    assert [r.id for r in await harness.service.expire_due()] == [expiring.id]
    cancelled = await harness.ask(run_id="run-2")
    assert await harness.service.cancel_run("run-2", "the run was cancelled") == 1
    assert heard == [
        (denied.id, "run-1", "denied"),
        (expiring.id, "run-1", "expired"),
        (cancelled.id, "run-2", "cancelled"),
    ]


async def test_a_refused_vote_a_quorum_vote_and_a_late_vote_call_no_listener() -> None:
    harness = Harness()
    heard = listen(harness.service, harness)
    request = await harness.ask(approvers=replace(APPROVERS, quorum=2))
    await harness.service.decide(request.id, Principal(id="U_NOBODY"), approve=True)  # not an approver
    await harness.service.decide(request.id, Principal(id="U_A"), approve=True)  # one of two
    assert heard == []
    await harness.service.decide(request.id, Principal(id="U_B"), approve=True)
    await harness.service.decide(request.id, Principal(id="U_B"), approve=False)  # already decided
    assert [status for _, _, status in heard] == ["approved"]


async def test_a_failing_listener_is_logged_and_the_others_still_run() -> None:
    harness = Harness()

    async def broken(request: ApprovalRequest) -> None:
        raise RuntimeError("engine down")

    harness.service.add_decision_listener(broken)
    heard = listen(harness.service, harness)
    request = await harness.ask()
    result = await harness.service.decide(request.id, Principal(id="U_A"), approve=True)
    assert isinstance(result, Decided)
    assert heard == [(request.id, "run-1", "approved")]


async def test_removing_a_listener_stops_it() -> None:
    harness = Harness()
    heard: list[str] = []

    async def listener(request: ApprovalRequest) -> None:
        heard.append(request.id)

    remove = harness.service.add_decision_listener(listener)
    first = await harness.ask()
    await harness.service.decide(first.id, Principal(id="U_A"), approve=True)
    remove()
    remove()  # idempotent
    second = await harness.ask()
    await harness.service.decide(second.id, Principal(id="U_A"), approve=True)
    assert heard == [first.id]
