"""The lifecycle's front door: a sorted `__all__` that is exactly the public API."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.doors import assert_door

DOORS = {
    "approvals": [
        "APPROVAL_EVENT_ADAPTER",
        "OUTCOMES",
        "SCOPES",
        "STATUSES",
        "AlreadyCancelled",
        "AlreadyDecided",
        "ApprovalCancelled",
        "ApprovalDecided",
        "ApprovalEvent",
        "ApprovalExpired",
        "ApprovalMisuseError",
        "ApprovalNotFoundError",
        "ApprovalReminder",
        "ApprovalRequest",
        "ApprovalRequested",
        "ApprovalService",
        "ApprovalStore",
        "ApprovalsError",
        "Approvers",
        "Ask",
        "AuditEntry",
        "AuditLog",
        "Clock",
        "ConversationRef",
        "DecideResult",
        "Decided",
        "DecisionListener",
        "DecisionRejected",
        "ExpiryScheduler",
        "ExpiryTimer",
        "FileHandshake",
        "HandshakeError",
        "HandshakeResult",
        "NotAuthorised",
        "NotFound",
        "Outcome",
        "Principal",
        "QuorumPending",
        "Rejection",
        "Scope",
        "ScopeNotOffered",
        "SqlApprovalStore",
        "SqlAuditLog",
        "Status",
        "StoreError",
        "SystemClock",
        "approval_metadata",
        "async_database_url",
        "authorise",
        "create_schema",
        "entry_for",
        "lazy_exports",
        "make_engine",
        "offered_scopes",
        "rejection_reason",
        "transition",
    ],
}


@pytest.mark.parametrize("module", sorted(DOORS))
def test_front_door_exports_exactly_its_api(module: str) -> None:
    assert_door(module, DOORS[module])


def test_the_door_loads_no_database_driver_until_asked() -> None:
    # Nor the permission engine (the shell grammar and program tables): the lifecycle names actions only.
    heavy = "{'sqlalchemy', 'apscheduler', 'approvals.permissions.engine', 'tree_sitter'}"
    code = f"import sys, approvals; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
