"""Permission engine and approval lifecycle: who may do what, and asking a human when in doubt.

The lowest layer: it knows nothing of Slack or language models. This front door is the lifecycle's
public API (the engine has its own, `approvals.permissions`). The SQL adapters and the expiry
scheduler load on first use, so importing the lifecycle never loads SQLAlchemy or APScheduler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from approvals.audit import OUTCOMES, AuditEntry, AuditLog, Outcome, entry_for
from approvals.errors import (
    ApprovalMisuseError,
    ApprovalNotFoundError,
    ApprovalsError,
    HandshakeError,
    StoreError,
)
from approvals.events import (
    APPROVAL_EVENT_ADAPTER,
    ApprovalCancelled,
    ApprovalDecided,
    ApprovalEvent,
    ApprovalExpired,
    ApprovalReminder,
    ApprovalRequested,
    DecisionRejected,
)
from approvals.handshake import FileHandshake, HandshakeResult
from approvals.lazy import lazy_exports
from approvals.lifecycle import authorise, rejection_reason, transition
from approvals.models import (
    SCOPES,
    STATUSES,
    AlreadyCancelled,
    AlreadyDecided,
    ApprovalRequest,
    Approvers,
    Ask,
    ConversationRef,
    Decided,
    DecideResult,
    NotAuthorised,
    NotFound,
    Principal,
    QuorumPending,
    Rejection,
    Scope,
    ScopeNotOffered,
    Status,
    offered_scopes,
)
from approvals.ports import ApprovalStore, Clock, ExpiryTimer, SystemClock
from approvals.service import ApprovalService

if TYPE_CHECKING:
    from approvals.scheduler import ExpiryScheduler
    from approvals.sql import (
        SqlApprovalStore,
        SqlAuditLog,
        approval_metadata,
        async_database_url,
        create_schema,
        make_engine,
    )

# name -> module, imported on first access (PEP 562).
_LAZY = {
    "ExpiryScheduler": "approvals.scheduler",
    "SqlApprovalStore": "approvals.sql",
    "SqlAuditLog": "approvals.sql",
    "approval_metadata": "approvals.sql",
    "async_database_url": "approvals.sql",
    "create_schema": "approvals.sql",
    "make_engine": "approvals.sql",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
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
]
