"""Value objects of the approval lifecycle: who asks, who may answer, and the request itself.

Slack identifiers enter here only as opaque strings. Every object is frozen: a state change is a
new `ApprovalRequest` produced by `approvals.lifecycle.transition`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Annotated, Literal, get_args

from pydantic import PlainSerializer

from approvals.permissions import Action, Decision, Layer, Risk

Scope = Literal["once", "run", "always"]
Status = Literal["pending", "approved", "denied", "expired", "cancelled"]

SCOPES: tuple[Scope, ...] = get_args(Scope)
STATUSES: tuple[Status, ...] = get_args(Status)
TERMINAL: frozenset[Status] = frozenset({"approved", "denied", "expired", "cancelled"})
# Narrowest first: with a quorum the granted scope is the narrowest any approver chose.
SCOPE_ORDER: dict[Scope, int] = {"once": 0, "run": 1, "always": 2}


# Read-only at run time (a MappingProxyType); serialised as a plain object in events and logs.
Context = Annotated[Mapping[str, str], PlainSerializer(dict, return_type=dict[str, str])]


def _empty_context() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Someone acting on a request: a Slack user id, `cli:<name>`, or a file-handshake identity.

    `groups` come from a trusted directory lookup (e.g. Slack user groups), never from the actor.
    """

    id: str
    groups: frozenset[str] = frozenset()
    display: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Approvers:
    """Who may decide a request. Empty means nobody (fail closed), never everybody."""

    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    allow_self_approval: bool = False
    quorum: int = 1  # approvals needed; any single denial vetoes

    def lists(self, principal: Principal) -> bool:
        """True when the principal is named directly or through one of its groups."""
        return principal.id in self.users or bool(principal.groups & self.groups)

    @property
    def empty(self) -> bool:
        """True when no user and no group is listed (nobody may decide)."""
        return not self.users and not self.groups


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationRef:
    """Where a run lives on a chat surface, as opaque strings (e.g. surface "slack", a channel, a thread).

    The lifecycle stores and returns it untouched; only the surface's adapter knows what the strings mean.
    """

    surface: str
    channel: str
    thread: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """An engine `ask` to put before a human: whose run, which action, who may answer, how long, where."""

    run_id: str
    agent_id: str
    requester: str | None
    action: Action
    digest: str  # binds the answer to the exact tool input
    decision: Decision
    approvers: Approvers
    timeout: timedelta
    conversation: ConversationRef | None = None
    # What an approver may want beside the action (the raw tool input, the files of a patch...).
    context: Context = field(default_factory=_empty_context)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """One pending (or decided) ask, bound to the exact tool input through `digest`."""

    id: str
    run_id: str
    agent_id: str
    requester_id: str | None
    action: Action
    digest: str
    risk: Risk
    layer: Layer
    reason: str
    rule: str | None
    scopes: tuple[Scope, ...]
    approvers: Approvers
    status: Status
    created_at: datetime
    expires_at: datetime
    nonce: str
    decided_by: str | None = None
    decided_at: datetime | None = None
    # While a quorum is pending this holds the narrowest scope chosen so far.
    decision_scope: Scope | None = None
    decision_reason: str | None = None
    approvals_so_far: tuple[str, ...] = ()
    context: Context = field(default_factory=_empty_context)
    # Added fields: when the reminder went out (so a restart does not remind twice), and the
    # row version used for compare-and-set in the store.
    reminded_at: datetime | None = None
    version: int = 0
    conversation: ConversationRef | None = None

    @property
    def terminal(self) -> bool:
        """True once the request is approved, denied, expired or cancelled."""
        return self.status in TERMINAL

    def summary(self) -> dict[str, object]:
        """What an external reader (CLI listing, file handshake) is shown; never the nonce."""
        return {
            "id": self.id,
            "run_id": self.run_id,
            "agent_id": self.agent_id,
            "action": str(self.action),
            "digest": self.digest,
            "risk": self.risk,
            "reason": self.reason,
            "scopes": list(self.scopes),
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """The decision (or the vote completing the quorum) won; `request` is terminal."""

    request: ApprovalRequest
    kind: Literal["decided"] = "decided"


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumPending:
    """The approval was counted but more are needed."""

    request: ApprovalRequest
    approvals: int
    needed: int
    kind: Literal["quorum_pending"] = "quorum_pending"


@dataclass(frozen=True, slots=True, kw_only=True)
class AlreadyDecided:
    """The request is no longer pending, or this principal already voted; nothing changed."""

    request: ApprovalRequest
    kind: Literal["already_decided"] = "already_decided"


@dataclass(frozen=True, slots=True, kw_only=True)
class AlreadyCancelled:
    """The request was cancelled (its run ended) before this decision; nothing changed."""

    request: ApprovalRequest
    kind: Literal["already_cancelled"] = "already_cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class NotAuthorised:
    """The principal may not decide this request; nothing changed (the attempt is audited)."""

    request: ApprovalRequest
    principal: Principal
    why: str
    kind: Literal["not_authorised"] = "not_authorised"


@dataclass(frozen=True, slots=True, kw_only=True)
class NotFound:
    """No request has this id."""

    request_id: str
    kind: Literal["not_found"] = "not_found"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeNotOffered:
    """The scope asked for (typically `always`) was not offered for this request."""

    request: ApprovalRequest
    scope: str
    kind: Literal["scope_not_offered"] = "scope_not_offered"


DecideResult = (
    Decided | QuorumPending | AlreadyDecided | AlreadyCancelled | NotAuthorised | NotFound | ScopeNotOffered
)
Rejection = AlreadyDecided | AlreadyCancelled | NotAuthorised | ScopeNotOffered


def offered_scopes(*, always_offerable: bool, risk: Risk, action: Action | None = None) -> tuple[Scope, ...]:
    """`always` only when the engine says its full scope can be shown, and never at high risk.

    Defence in depth: an action whose text would read as a pattern once persisted as the rule
    `kind(target)` (glob characters, parentheses, line breaks) never gets `always` either, so an
    "always" grant can never be broader than the exact action shown.
    """
    if action is not None and any(ch in action.target for ch in _PATTERN_CHARS):
        return ("once", "run")
    if always_offerable and risk in ("low", "medium"):
        return ("once", "run", "always")
    return ("once", "run")


_PATTERN_CHARS = frozenset("*?[]()\n\r")
