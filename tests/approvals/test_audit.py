"""The audit trail: every layer's decision, who resolved it, when and why; events serialise losslessly."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import pytest

from approvals.audit import OUTCOMES, AuditEntry, Outcome
from approvals.errors import StoreError
from approvals.events import (
    ApprovalCancelled,
    ApprovalDecided,
    ApprovalEvent,
    ApprovalExpired,
    ApprovalReminder,
    ApprovalRequested,
    DecisionRejected,
    from_json,
    to_json,
)
from approvals.models import ApprovalRequest, Approvers, Ask, ConversationRef, Principal
from approvals.permissions import Action
from approvals.service import ApprovalService
from approvals.sql import SqlApprovalStore, SqlAuditLog, create_schema, make_engine
from approvals.testing import EPOCH, FrozenClock, ask_decision, sample_request

APPROVERS = Approvers(users=frozenset({"U_A", "U_B"}), quorum=1)
Setup = tuple[ApprovalService, SqlAuditLog, FrozenClock]


@pytest.fixture
async def setup(database_url: str) -> AsyncIterator[Setup]:
    engine = make_engine(database_url)
    await create_schema(engine)
    clock = FrozenClock()
    audit = SqlAuditLog(engine)
    yield ApprovalService(SqlApprovalStore(engine), audit, clock), audit, clock
    await engine.dispose()


async def ask(service: ApprovalService, target: str, **overrides: Any) -> ApprovalRequest:
    arguments: dict[str, Any] = {
        "run_id": "run-1",
        "agent_id": "agent1",
        "requester": "U_REQ",
        "action": Action(kind="command", target=target),
        "digest": "9" * 64,
        "decision": ask_decision(reason=f"why {target}"),
        "approvers": APPROVERS,
        "timeout": timedelta(minutes=5),
    }
    arguments.update(overrides)
    return await service.request(Ask(**arguments))


async def test_a_runs_whole_story_is_in_the_trail(setup: Setup) -> None:
    service, audit, clock = setup
    await service.record_decision(
        AuditEntry(
            at=clock.now(),
            run_id="run-1",
            agent_id="agent1",
            actor="engine",
            action="command(ls)",
            outcome="allow",
            layer="rule",
            risk="low",
            reason="allow rule command(ls)",
        )
    )
    await service.record_decision(
        AuditEntry(
            at=clock.now(),
            run_id="run-1",
            agent_id="agent1",
            actor="engine",
            action="command(rm -rf /)",
            outcome="deny",
            layer="floor",
            risk="critical",
            reason="floor: recursive delete of /",
        )
    )
    approved = await ask(service, "make test")
    clock.advance(timedelta(seconds=3))
    await service.decide(approved.id, Principal(id="U_EVE"), approve=True)
    await service.decide(approved.id, Principal(id="U_A"), approve=True, scope="run", reason="fine")
    denied = await ask(service, "git push")
    await service.decide(denied.id, Principal(id="U_B"), approve=False, reason="not yet")
    expired = await ask(service, "make deploy", timeout=timedelta(seconds=1))
    cancelled = await ask(service, "make bench")
    clock.advance(timedelta(seconds=2))
    await service.expire_due()
    await service.cancel_run("run-1")

    trail = [
        (e.outcome, e.actor, e.action, e.layer, e.risk, e.reason, e.request_id, e.scope)
        for e in await audit.query(run_id="run-1")
    ]
    assert trail == [
        ("allow", "engine", "command(ls)", "rule", "low", "allow rule command(ls)", None, None),
        ("deny", "engine", "command(rm -rf /)", "floor", "critical", "floor: recursive delete of /",
         None, None),
        ("ask", "engine", "command(make test)", "risk", "medium", "why make test", approved.id, None),
        ("rejected", "U_EVE", "command(make test)", "risk", "medium",
         "U_EVE is not an approver for this request", approved.id, None),
        ("approved", "U_A", "command(make test)", "risk", "medium", "fine", approved.id, "run"),
        ("ask", "engine", "command(git push)", "risk", "medium", "why git push", denied.id, None),
        ("denied", "U_B", "command(git push)", "risk", "medium", "not yet", denied.id, None),
        ("ask", "engine", "command(make deploy)", "risk", "medium", "why make deploy", expired.id, None),
        ("ask", "engine", "command(make bench)", "risk", "medium", "why make bench", cancelled.id, None),
        ("expired", "engine", "command(make deploy)", "risk", "medium", "no decision before the deadline",
         expired.id, None),
        ("cancelled", "engine", "command(make bench)", "risk", "medium", "run cancelled", cancelled.id, None),
    ]  # fmt: skip
    entries = await audit.query(run_id="run-1")
    assert [e.at - EPOCH for e in entries][3:5] == [timedelta(seconds=3)] * 2  # when, to the clock


async def test_trail_order_is_insertion_order_even_with_equal_timestamps(setup: Setup) -> None:
    _, audit, clock = setup
    for i in range(20):
        await audit.record(
            AuditEntry(
                at=clock.now(),
                run_id="r",
                agent_id="a",
                actor="engine",
                action=f"read(f{i})",
                outcome="allow",
            )
        )
    assert [e.action for e in await audit.query()] == [f"read(f{i})" for i in range(20)]


async def test_a_naive_timestamp_is_refused_and_nothing_is_written(setup: Setup) -> None:
    _, audit, clock = setup
    entry = AuditEntry(
        at=clock.now().replace(tzinfo=None),
        run_id="r",
        agent_id="a",
        actor="engine",
        action="x",
        outcome="deny",
    )
    with pytest.raises(StoreError):
        await audit.record(entry)
    assert await audit.query() == []


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_entries_serialise_to_one_json_line(outcome: Outcome) -> None:
    entry = AuditEntry(
        at=EPOCH, run_id="r", agent_id="a", actor="U_A", action="command(a\nb)", outcome=outcome
    )
    line = entry.to_line()
    assert "\n" not in line
    assert entry.to_json()["outcome"] == outcome


# The service freezes context into a MappingProxyType; events must still serialise.
REQUEST = sample_request(
    context=MappingProxyType({"input": "x"}), conversation=ConversationRef(surface="slack", channel="C1")
)


@pytest.mark.parametrize(
    "event",
    [
        ApprovalRequested(request=REQUEST),
        ApprovalDecided(request=replace(REQUEST, status="approved", decided_by="U_A"), principal_id="U_A"),
        ApprovalDecided(request=replace(REQUEST, approvals_so_far=("U_A",)), principal_id="U_A", final=False),
        ApprovalExpired(request=replace(REQUEST, status="expired")),
        ApprovalReminder(request=replace(REQUEST, reminded_at=EPOCH)),
        ApprovalCancelled(request=replace(REQUEST, status="cancelled")),
        DecisionRejected(request_id="x", principal_id="U_EVE", why="not an approver", at=EPOCH),
    ],
    ids=lambda e: e.kind,
)
def test_events_round_trip_through_json(event: ApprovalEvent) -> None:
    data = to_json(event)
    assert from_json(json.loads(json.dumps(data))) == event
