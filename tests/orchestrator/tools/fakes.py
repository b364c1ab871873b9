"""Test doubles at the gate's ports: a scripted engine and an approver that answers from the test."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from approvals.events import ApprovalEvent, ApprovalRequested
from approvals.models import ApprovalRequest, Approvers
from approvals.permissions import Action, Decision
from approvals.ports import Clock
from approvals.service import ApprovalService
from approvals.testing import InMemoryApprovalStore, InMemoryAuditLog
from orchestrator.errors import ToolParked
from orchestrator.events import RunEvent
from orchestrator.ports import ApprovalPort, Emit, Evaluator
from orchestrator.tools.gate import GateCall, PermissionGate

ALLOW = Decision(verdict="allow", resolved="allow", risk="low", layer="risk", reason="low risk")
ASK = Decision(verdict="ask", resolved="ask", risk="medium", layer="risk", reason="medium risk")
DENY = Decision(verdict="deny", resolved="deny", risk="high", layer="rule", reason="rule deny", rule="x")
PUSH = Decision(verdict="ask", resolved="ask", risk="high", layer="risk", reason="push", side_effect=True)
EGRESS = Decision(verdict="ask", resolved="ask", risk="high", layer="risk", reason="network", egress=True)


@dataclass
class ScriptedEngine:
    """Decisions by action target (default allow); a run grant turns an ask into an allow, like the engine."""

    script: dict[str, Decision] = field(default_factory=dict)
    seen: list[tuple[Action, ...]] = field(default_factory=list)

    def evaluate_many(self, actions: Sequence[Action], *, grants: frozenset[str] = frozenset()) -> Decision:
        self.seen.append(tuple(actions))
        decision = self.script.get(actions[0].target, ALLOW)
        if decision.resolved == "ask" and all(self.scope_key(a) in grants for a in actions):
            return Decision(
                verdict="allow",
                resolved="allow",
                risk=decision.risk,
                layer="policy",
                reason="granted for this run",
                side_effect=decision.side_effect,
                egress=decision.egress,
                hosts=decision.hosts,  # a "for this run" grant keeps the approval's host list
            )
        return decision

    def scope_key(self, action: Action) -> str:
        return str(action)


class Harness:
    """A real ApprovalService over the in-memory store, plus what the run emitted."""

    def __init__(
        self, *, approvers: frozenset[str] = frozenset({"U_APPROVER"}), clock: Clock | None = None
    ) -> None:
        self.audit = InMemoryAuditLog()
        self.service = ApprovalService(InMemoryApprovalStore(), self.audit, clock, poll_interval=0.01)
        self.events: list[RunEvent] = []
        self.requested: asyncio.Queue[ApprovalRequest] = asyncio.Queue()
        self.service.subscribe(self._on_approval_event)
        self.approvers = Approvers(users=approvers)

    def _on_approval_event(self, event: ApprovalEvent) -> None:
        if isinstance(event, ApprovalRequested):
            self.requested.put_nowait(event.request)

    async def emit(self, event: RunEvent) -> None:
        self.events.append(event)

    def gate(
        self,
        *,
        timeout: timedelta = timedelta(minutes=5),
        approvals: ApprovalPort | None = None,
        judge_timeout: float = 2.0,
        checkpoint: Emit | None = None,
    ) -> PermissionGate:
        return PermissionGate(
            run_id="run1",
            requester="U_REQUESTER",
            approvals=approvals or self.service,
            approvers=self.approvers,
            timeout=timeout,
            emit=self.emit,
            checkpoint=checkpoint,
            judge_timeout=judge_timeout,
        )

    async def next_request(self) -> ApprovalRequest:
        return await asyncio.wait_for(self.requested.get(), timeout=5)

    def kinds(self) -> list[str]:
        return [event.kind for event in self.events]


async def parked_on(call: Awaitable[object]) -> str:
    """The id of the request `call` parks on (it must park: anything else fails the test)."""
    try:
        result = await call
    except ToolParked as parked:
        return parked.request_id
    raise AssertionError(f"the call did not park: {result}")


async def parks(gate: PermissionGate, engine: Evaluator, call: GateCall, awaiting: str | None = None) -> str:
    """The id of the request the gate parks `call` on."""
    return await parked_on(gate.check(engine, call, awaiting=awaiting))
