"""Events the approval lifecycle emits to subscribers (the Slack bot, the terminal runner, logs).

Frozen keyword-only dataclasses with a `kind` discriminator; `APPROVAL_EVENT_ADAPTER` is the
JSON schema for persistence and logs. Each carries the request as it stood after the change, so a
renderer never needs to read the store again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from approvals.models import ApprovalRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested:
    """A new request is pending, waiting for its approvers."""

    kind: Literal["approval_requested"] = "approval_requested"
    request: ApprovalRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided:
    """A human decided (approved, denied, or cast a quorum vote when `final` is False)."""

    kind: Literal["approval_decided"] = "approval_decided"
    request: ApprovalRequest
    principal_id: str
    final: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalExpired:
    """Nobody decided before the deadline: the request expired."""

    kind: Literal["approval_expired"] = "approval_expired"
    request: ApprovalRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalReminder:
    """Sent once, `remind_before` ahead of the deadline, while the request is still pending."""

    kind: Literal["approval_reminder"] = "approval_reminder"
    request: ApprovalRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalCancelled:
    """The request was withdrawn before anyone decided (e.g. its run ended)."""

    kind: Literal["approval_cancelled"] = "approval_cancelled"
    request: ApprovalRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRejected:
    """Someone tried to decide and was refused (not an approver, self-approval, wrong nonce...)."""

    kind: Literal["decision_rejected"] = "decision_rejected"
    request_id: str
    principal_id: str
    why: str
    at: datetime
    request: ApprovalRequest | None = None


ApprovalEvent = (
    ApprovalRequested
    | ApprovalDecided
    | ApprovalExpired
    | ApprovalReminder
    | ApprovalCancelled
    | DecisionRejected
)

APPROVAL_EVENT_ADAPTER: TypeAdapter[ApprovalEvent] = TypeAdapter(
    Annotated[ApprovalEvent, Field(discriminator="kind")]
)


def to_json(event: ApprovalEvent) -> dict[str, Any]:
    """JSON-ready dict (datetimes as ISO strings, sets as lists)."""
    data: dict[str, Any] = APPROVAL_EVENT_ADAPTER.dump_python(event, mode="json")
    return data


def from_json(data: object) -> ApprovalEvent:
    """Validate a dict produced by `to_json` back into an event."""
    return APPROVAL_EVENT_ADAPTER.validate_python(data)
