"""The audit trail: every decision of every layer, appended and never rewritten.

The engine's allow/deny verdicts arrive through `ApprovalService.record_decision`; the lifecycle
adds the ask, each human decision, expiries, cancellations and refused attempts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, get_args

from approvals.models import ApprovalRequest

Outcome = Literal[
    "allow", "ask", "deny", "approved", "denied", "expired", "cancelled", "rejected", "vote", "reminded"
]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One line of the audit trail. `actor` is "engine" or the principal id that acted."""

    at: datetime
    run_id: str
    agent_id: str
    actor: str
    action: str
    outcome: Outcome
    layer: str | None = None
    risk: str | None = None
    reason: str | None = None
    request_id: str | None = None
    # Added: the scope an approval granted, for "approved" entries.
    scope: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict of the entry (the time as an ISO string)."""
        return {
            "at": self.at.isoformat(),
            "run_id": self.run_id,
            "agent_id": self.agent_id,
            "actor": self.actor,
            "action": self.action,
            "outcome": self.outcome,
            "layer": self.layer,
            "risk": self.risk,
            "reason": self.reason,
            "request_id": self.request_id,
            "scope": self.scope,
        }

    def to_line(self) -> str:
        """The entry as one JSON line, keys sorted."""
        return json.dumps(self.to_json(), sort_keys=True)


class AuditLog(Protocol):
    """Append-only: there is deliberately no update or delete."""

    async def record(self, entry: AuditEntry) -> None:
        """Append one entry."""
        ...

    async def query(self, run_id: str | None = None, limit: int | None = None) -> list[AuditEntry]:
        """Entries oldest first; with `limit`, the most recent `limit` of them."""
        ...


def entry_for(
    request: ApprovalRequest,
    outcome: Outcome,
    *,
    at: datetime,
    actor: str,
    reason: str | None = None,
    scope: str | None = None,
) -> AuditEntry:
    """An audit entry describing `request` (its action, layer and risk)."""
    return AuditEntry(
        at=at,
        run_id=request.run_id,
        agent_id=request.agent_id,
        actor=actor,
        action=str(request.action),
        outcome=outcome,
        layer=request.layer,
        risk=request.risk,
        reason=reason,
        request_id=request.id,
        scope=scope,
    )
