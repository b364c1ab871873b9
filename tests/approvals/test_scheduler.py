"""APScheduler really fires reminders and expiries; timers are rebuilt from the database on restart."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from approvals.events import ApprovalEvent
from approvals.models import ApprovalRequest, Approvers, Ask, Decided, Principal
from approvals.permissions import Action
from approvals.scheduler import ExpiryScheduler
from approvals.service import ApprovalService
from approvals.sql import SqlApprovalStore, SqlAuditLog, create_schema, make_engine
from approvals.testing import (
    FrozenClock,
    InMemoryApprovalStore,
    InMemoryAuditLog,
    ask_decision,
)

DEADLINE = 10.0  # seconds: generous, only hit when something is broken


class Recorder:
    """Collects events and lets a test wait for one kind with a deadline."""

    def __init__(self, service: ApprovalService) -> None:
        self.events: list[ApprovalEvent] = []
        self._changed = asyncio.Condition()
        service.subscribe(self.on_event)

    async def on_event(self, event: ApprovalEvent) -> None:
        async with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    async def wait_for(self, kind: str, request_id: str) -> ApprovalEvent:
        def found() -> ApprovalEvent | None:
            return next((e for e in self.events if e.kind == kind and _id(e) == request_id), None)

        async with asyncio.timeout(DEADLINE), self._changed:
            await self._changed.wait_for(lambda: found() is not None)
        event = found()
        assert event is not None
        return event

    def kinds(self, request_id: str) -> list[str]:
        return [e.kind for e in self.events if _id(e) == request_id]


def _id(event: ApprovalEvent) -> str:
    return event.request_id if event.kind == "decision_rejected" else event.request.id


async def ask(service: ApprovalService, timeout: timedelta) -> ApprovalRequest:
    return await service.request(
        Ask(
            run_id="run-1",
            agent_id="agent1",
            requester=None,
            action=Action(kind="command", target="make deploy"),
            digest="f" * 64,
            decision=ask_decision(),
            approvers=Approvers(users=frozenset({"U_A"})),
            timeout=timeout,
        )
    )


@pytest.fixture
def memory_service() -> ApprovalService:
    return ApprovalService(InMemoryApprovalStore(), InMemoryAuditLog())


async def test_reminder_then_expiry_fire_on_time(memory_service: ApprovalService) -> None:
    recorder = Recorder(memory_service)
    scheduler = ExpiryScheduler(memory_service, remind_before=timedelta(milliseconds=300))
    await scheduler.start()
    try:
        request = await ask(memory_service, timedelta(milliseconds=500))
        assert scheduler.job_ids() == [f"expire:{request.id}", f"remind:{request.id}"]
        reminder = await recorder.wait_for("approval_reminder", request.id)
        assert reminder.kind == "approval_reminder"
        assert reminder.request.status == "pending"
        expired = await recorder.wait_for("approval_expired", request.id)
        assert expired.kind == "approval_expired"
        assert memory_service.clock.now() >= request.expires_at
        assert recorder.kinds(request.id) == ["approval_requested", "approval_reminder", "approval_expired"]
        stored = await memory_service.get(request.id)
        assert stored is not None
        assert stored.status == "expired"
        assert scheduler.job_ids() == []
    finally:
        await scheduler.stop()


async def test_a_decision_cancels_the_timers(memory_service: ApprovalService) -> None:
    scheduler = ExpiryScheduler(memory_service, remind_before=timedelta(seconds=30))
    await scheduler.start()
    try:
        request = await ask(memory_service, timedelta(minutes=5))
        assert len(scheduler.job_ids()) == 2
        assert isinstance(await memory_service.decide(request.id, Principal(id="U_A"), approve=True), Decided)
        assert scheduler.job_ids() == []
    finally:
        await scheduler.stop()
    assert not scheduler.running


class Process:
    """One bot process: its own engine, service and scheduler over the shared database."""

    def __init__(
        self,
        url: str,
        clock: FrozenClock | None = None,
        remind_before: timedelta = timedelta(milliseconds=100),
    ) -> None:
        self.engine = make_engine(url)
        self.service = ApprovalService(SqlApprovalStore(self.engine), SqlAuditLog(self.engine), clock)
        self.recorder = Recorder(self.service)
        self.scheduler = ExpiryScheduler(self.service, remind_before=remind_before)

    async def start(self) -> None:
        await create_schema(self.engine)
        await self.scheduler.start()

    async def stop(self) -> None:
        await self.scheduler.stop()
        await self.engine.dispose()


async def test_timers_survive_a_restart(database_url: str) -> None:
    first = Process(database_url)
    await first.start()
    soon = await ask(first.service, timedelta(seconds=30))
    later = await ask(first.service, timedelta(hours=1))
    overdue = await ask(first.service, timedelta(minutes=2))
    almost = await ask(first.service, timedelta(minutes=3, seconds=1))  # its reminder time passes while down
    await first.stop()  # the process dies before any timer fired
    assert first.recorder.kinds(soon.id) == ["approval_requested"]

    # The next process starts with a clock three minutes on: `overdue` is past its deadline.
    clock = FrozenClock(overdue.created_at + timedelta(minutes=3))
    second = Process(database_url, clock, remind_before=timedelta(seconds=30))
    await second.start()
    try:
        # Overdue requests expire during start-up, before anything else happens.
        assert second.recorder.kinds(overdue.id) == ["approval_expired"]
        assert second.recorder.kinds(soon.id) == ["approval_expired"]
        assert second.recorder.kinds(almost.id) == ["approval_reminder"]
        assert sorted(second.scheduler.job_ids()) == sorted(
            [f"expire:{later.id}", f"remind:{later.id}", f"expire:{almost.id}"]
        )
        stored = await second.service.get(later.id)
        assert stored is not None
        assert stored.status == "pending"
    finally:
        await second.stop()


async def test_a_rescheduled_timer_really_fires_after_restart(database_url: str) -> None:
    first = Process(database_url)
    await first.start()
    # Long enough that the second process is up before it is due, even on a loaded CI machine
    # (at 600 ms it was once due already, and expired by the start-up sweep instead).
    request = await ask(first.service, timedelta(seconds=3))
    await first.stop()

    second = Process(database_url)
    await second.start()
    try:
        assert f"expire:{request.id}" in second.scheduler.job_ids()
        await second.recorder.wait_for("approval_expired", request.id)
        stored = await second.service.get(request.id)
        assert stored is not None
        assert stored.status == "expired"
    finally:
        await second.stop()


async def test_the_sweep_expires_requests_another_replica_created() -> None:
    store, audit = InMemoryApprovalStore(), InMemoryAuditLog()
    survivor = ApprovalService(store, audit)
    recorder = Recorder(survivor)
    scheduler = ExpiryScheduler(survivor, sweep_every=timedelta(milliseconds=100))
    await scheduler.start()
    try:
        # A replica without a running timer (it crashed) created this request after our start-up.
        crashed = ApprovalService(store, audit)
        request = await ask(crashed, timedelta(milliseconds=300))
        assert scheduler.job_ids() == []  # nothing scheduled here for it...
        await recorder.wait_for("approval_expired", request.id)  # ...yet the sweep expires it
    finally:
        await scheduler.stop()
