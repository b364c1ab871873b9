"""A decision, an expiry or a cancellation wakes the approval's run; a quorum vote or a reminder does not."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from approvals import ApprovalService, Approvers, Ask, Principal
from approvals.permissions import Action, action_digest
from approvals.testing import FrozenClock, InMemoryApprovalStore, InMemoryAuditLog, ask_decision
from bot.engine import wake_on_decisions, wake_settled
from orchestrator import InMemoryRunStore, RunParked, RunStarted


def _service() -> tuple[ApprovalService, FrozenClock]:
    clock = FrozenClock()
    return ApprovalService(InMemoryApprovalStore(), InMemoryAuditLog(), clock, poll_interval=0.01), clock


def _ask(run_id: str, *, quorum: int = 1) -> Ask:
    return Ask(
        run_id=run_id,
        agent_id="a1",
        requester="U_REQ",
        action=Action(kind="command", target="make deploy"),
        digest=action_digest("run_command", {"command": "make deploy"}),
        decision=ask_decision(),
        approvers=Approvers(users=frozenset({"U_A", "U_B"}), quorum=quorum),
        timeout=timedelta(minutes=5),
    )


async def test_each_ending_of_an_approval_wakes_its_run_once() -> None:
    service, clock = _service()
    sent: list[tuple[str, Any]] = []

    async def send(run_id: str, message: Any) -> None:
        sent.append((run_id, message))

    wake_on_decisions(service, send)
    decided = await service.request(_ask("run-decided"))
    voted = await service.request(_ask("run-quorum", quorum=2))
    expiring = await service.request(_ask("run-expired"))
    await service.request(_ask("run-cancelled"))
    await service.decide(decided.id, Principal(id="U_A"), approve=True)
    await service.decide(voted.id, Principal(id="U_A"), approve=True)  # 1 of 2: still pending
    assert sent == [("run-decided", {"approval": decided.id})]
    await service.decide(voted.id, Principal(id="U_B"), approve=True)  # the quorum is met
    await service.cancel_run("run-cancelled", "stopped")
    clock.advance(timedelta(minutes=10))
    await service.expire_due()
    assert [run for run, _ in sent] == ["run-decided", "run-quorum", "run-cancelled", "run-expired"]
    assert sent[-1] == ("run-expired", {"approval": expiring.id})


async def test_a_failing_wake_never_undoes_the_decision() -> None:
    service, _ = _service()

    async def unreachable(run_id: str, message: Any) -> None:
        raise ConnectionError("system database down")

    wake_on_decisions(service, unreachable)
    request = await service.request(_ask("run-1"))
    await service.decide(request.id, Principal(id="U_A"), approve=True)
    stored = await service.get(request.id)
    assert stored is not None
    assert stored.status == "approved"


async def test_a_parked_run_whose_approval_was_decided_before_a_restart_is_woken() -> None:
    """The decision is stored, the process died before its wake: start-up finds it in the stores."""
    service, _ = _service()
    store = InMemoryRunStore()
    decided = await service.request(_ask("run-decided"))
    waiting = await service.request(_ask("run-waiting"))
    for run_id, request_id in (("run-decided", decided.id), ("run-waiting", waiting.id), ("run-live", None)):
        await store.append(RunStarted(run_id=run_id, seq=1, at=1.0, task="t", agents=()))
        if request_id is not None:
            await store.append(RunParked(run_id=run_id, seq=2, at=2.0, waiting=(request_id,)))
    await service.decide(decided.id, Principal(id="U_A"), approve=True)  # nobody subscribed: no wake
    sent: list[tuple[str, Any]] = []

    async def send(run_id: str, message: Any) -> None:
        sent.append((run_id, message))

    woken = await wake_settled(
        store, service, ["run-decided", "run-waiting", "run-live", "run-unknown"], send
    )
    assert woken == ["run-decided"]
    assert sent == [("run-decided", {"approval": decided.id})]


async def test_hundreds_of_runs_left_behind_are_looked_at_together_and_woken_in_order() -> None:
    service, _ = _service()
    store = InMemoryRunStore()
    run_ids = [f"run-{i:03d}" for i in range(120)]
    for i, run_id in enumerate(run_ids):
        request = await service.request(_ask(run_id))
        await store.append(RunStarted(run_id=run_id, seq=1, at=1.0, task="t", agents=()))
        await store.append(RunParked(run_id=run_id, seq=2, at=2.0, waiting=(request.id,)))
        if i % 3 == 0:
            await service.decide(request.id, Principal(id="U_A"), approve=True)
    sent: list[str] = []

    async def send(run_id: str, message: Any) -> None:
        sent.append(run_id)

    woken = await wake_settled(store, service, reversed(run_ids), send)
    settled = [run_id for i, run_id in enumerate(run_ids) if i % 3 == 0]
    assert woken == sent == settled[::-1]  # the order given, each once
