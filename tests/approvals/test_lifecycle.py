"""The pure state machine: every transition, authorisation rule, quorum and scope check."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approvals.lifecycle import Cancel, Expire, LifecycleEvent, Remind, Vote, authorise, transition
from approvals.models import (
    STATUSES,
    TERMINAL,
    AlreadyCancelled,
    AlreadyDecided,
    ApprovalRequest,
    Approvers,
    NotAuthorised,
    Principal,
    Scope,
    ScopeNotOffered,
    Status,
    offered_scopes,
)
from approvals.permissions import Action, Risk
from approvals.testing import EPOCH, sample_request

NOW = EPOCH + timedelta(minutes=1)
ALICE = Principal(id="U_A")
BOB = Principal(id="U_B")
REQUESTER = Principal(id="U_REQ")
INTRUDER = Principal(id="U_EVE")
OPS_MEMBER = Principal(id="U_OPS", groups=frozenset({"S_OPS"}))
OTHER_GROUP = Principal(id="U_DEV", groups=frozenset({"S_DEV"}))


@pytest.mark.parametrize(
    ("event", "status", "decided_by", "scope"),
    [
        (Vote(principal=ALICE, approve=True), "approved", "U_A", "once"),
        (Vote(principal=ALICE, approve=True, scope="run"), "approved", "U_A", "run"),
        (Vote(principal=ALICE, approve=True, scope="always"), "approved", "U_A", "always"),
        (Vote(principal=ALICE, approve=False, reason="no"), "denied", "U_A", None),
        (Vote(principal=OPS_MEMBER, approve=True), "approved", "U_OPS", "once"),
        (Expire(), "expired", None, None),
        (Cancel(reason="stopped"), "cancelled", None, None),
    ],
)
def test_pending_moves_to_each_terminal_state(
    event: LifecycleEvent, status: Status, decided_by: str | None, scope: Scope | None
) -> None:
    after = transition(sample_request(), event, NOW)
    assert isinstance(after, ApprovalRequest)
    assert (after.status, after.decided_by, after.decided_at, after.decision_scope) == (
        status,
        decided_by,
        NOW,
        scope,
    )
    assert after.terminal


@pytest.mark.parametrize("status", sorted(TERMINAL))
@pytest.mark.parametrize(
    "event",
    [Vote(principal=ALICE, approve=True), Vote(principal=ALICE, approve=False), Expire(), Cancel(), Remind()],
    ids=["approve", "deny", "expire", "cancel", "remind"],
)
def test_terminal_states_never_change(status: Status, event: LifecycleEvent) -> None:
    decided = sample_request(status=status, decided_by="U_B", decided_at=EPOCH)
    # A cancelled request says so (its run ended), so a late click is not told "already decided".
    expected = AlreadyCancelled if status == "cancelled" else AlreadyDecided
    assert transition(decided, event, NOW) == expected(request=decided)


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_intruders_learn_nothing_from_a_decided_request(status: Status) -> None:
    decided = sample_request(status=status, decided_by="U_B", decided_at=EPOCH)
    result = transition(decided, Vote(principal=INTRUDER, approve=True), NOW)
    assert isinstance(result, NotAuthorised)


def test_every_status_is_covered() -> None:
    assert set(STATUSES) == TERMINAL | {"pending"}


@pytest.mark.parametrize(
    ("principal", "approve", "approvers", "why"),
    [
        (INTRUDER, True, None, "U_EVE is not an approver for this request"),
        (INTRUDER, False, None, "U_EVE is not an approver for this request"),
        (OTHER_GROUP, True, None, "U_DEV is not an approver for this request"),
        (REQUESTER, True, None, "the requester may not approve their own request"),
        (ALICE, True, Approvers(), "no approvers are configured for this request"),
        # Groups are matched by id only: a display name that looks like a group is not one.
        (Principal(id="S_OPS"), True, None, "S_OPS is not an approver for this request"),
    ],
)
def test_unauthorised_votes_change_nothing(
    principal: Principal, approve: bool, approvers: Approvers | None, why: str
) -> None:
    request = sample_request() if approvers is None else sample_request(approvers=approvers)
    result = transition(request, Vote(principal=principal, approve=approve), NOW)
    assert result == NotAuthorised(request=request, principal=principal, why=why)


@pytest.mark.parametrize(
    ("principal", "approve", "allow_self", "allowed"),
    [
        (REQUESTER, True, False, False),
        (REQUESTER, True, True, True),
        (REQUESTER, False, False, True),  # denying your own request is always allowed
        (ALICE, True, False, True),
        (OPS_MEMBER, True, False, True),
    ],
)
def test_self_approval_needs_configuration(
    principal: Principal, approve: bool, allow_self: bool, allowed: bool
) -> None:
    approvers = replace(sample_request().approvers, allow_self_approval=allow_self)
    assert (authorise(sample_request(approvers=approvers), principal, approve=approve) is None) is allowed


def test_requester_without_id_is_never_self() -> None:
    request = sample_request(requester_id=None, approvers=Approvers(users=frozenset({"U_REQ"})))
    assert authorise(request, REQUESTER, approve=True) is None


@pytest.mark.parametrize(
    ("always_offerable", "risk", "scopes"),
    [
        (True, "low", ("once", "run", "always")),
        (True, "medium", ("once", "run", "always")),
        (True, "high", ("once", "run")),
        (True, "critical", ("once", "run")),
        (False, "low", ("once", "run")),
    ],
)
def test_always_is_offered_only_when_the_engine_allows_it(
    always_offerable: bool, risk: Risk, scopes: tuple[Scope, ...]
) -> None:
    assert offered_scopes(always_offerable=always_offerable, risk=risk) == scopes


@pytest.mark.parametrize(
    ("target", "offered"),
    [
        ("make test", True),
        ("git push origin main", True),
        ("rm build/*.o", False),  # persisted as a rule, * would match far more than was shown
        ("ls file?.txt", False),
        ("cat [ab].txt", False),
        ("echo ok)\nrm -rf ~ (", False),
        ("echo a\rb", False),
    ],
)
def test_always_is_never_offered_for_text_that_reads_as_a_pattern(target: str, offered: bool) -> None:
    scopes = offered_scopes(always_offerable=True, risk="low", action=Action(kind="command", target=target))
    assert ("always" in scopes) is offered


@pytest.mark.parametrize("scope", ["always", "forever", ""])
def test_a_scope_that_was_not_offered_is_refused(scope: str) -> None:
    request = sample_request(scopes=("once", "run"))
    result = transition(request, Vote(principal=ALICE, approve=True, scope=scope), NOW)
    assert result == ScopeNotOffered(request=request, scope=scope)


def test_quorum_counts_distinct_approvers_then_approves_with_narrowest_scope() -> None:
    request = sample_request(approvers=replace(sample_request().approvers, quorum=2))
    first = transition(request, Vote(principal=ALICE, approve=True, scope="always"), NOW)
    assert isinstance(first, ApprovalRequest)
    assert (first.status, first.approvals_so_far) == ("pending", ("U_A",))
    again = transition(first, Vote(principal=ALICE, approve=True), NOW)
    assert again == AlreadyDecided(request=first)
    second = transition(first, Vote(principal=OPS_MEMBER, approve=True, scope="run"), NOW)
    assert isinstance(second, ApprovalRequest)
    assert (second.status, second.approvals_so_far, second.decision_scope, second.decided_by) == (
        "approved",
        ("U_A", "U_OPS"),
        "run",
        "U_OPS",
    )


def test_one_deny_vetoes_a_quorum_in_progress() -> None:
    request = sample_request(approvers=replace(sample_request().approvers, quorum=3))
    first = transition(request, Vote(principal=ALICE, approve=True), NOW)
    assert isinstance(first, ApprovalRequest)
    vetoed = transition(first, Vote(principal=BOB, approve=False, reason="too risky"), NOW)
    assert isinstance(vetoed, ApprovalRequest)
    assert (vetoed.status, vetoed.decided_by, vetoed.decision_reason) == ("denied", "U_B", "too risky")


@pytest.mark.parametrize("late", [timedelta(0), timedelta(seconds=1), timedelta(days=1)])
def test_a_vote_at_or_after_the_deadline_expires_the_request(late: timedelta) -> None:
    request = sample_request()
    after = transition(request, Vote(principal=ALICE, approve=True), request.expires_at + late)
    assert isinstance(after, ApprovalRequest)
    assert (after.status, after.decided_by) == ("expired", None)


def test_a_vote_just_before_the_deadline_counts() -> None:
    request = sample_request()
    after = transition(
        request, Vote(principal=ALICE, approve=True), request.expires_at - timedelta(microseconds=1)
    )
    assert isinstance(after, ApprovalRequest)
    assert after.status == "approved"


def test_reminder_is_marked_once() -> None:
    reminded = transition(sample_request(), Remind(), NOW)
    assert isinstance(reminded, ApprovalRequest)
    assert (reminded.status, reminded.reminded_at) == ("pending", NOW)
    assert transition(reminded, Remind(), NOW) == AlreadyDecided(request=reminded)


def test_transition_never_mutates_its_input() -> None:
    request = sample_request()
    snapshot = replace(request)
    for event in (Vote(principal=ALICE, approve=True), Expire(), Cancel(), Remind()):
        transition(request, event, NOW)
    assert request == snapshot


PRINCIPALS = [ALICE, BOB, REQUESTER, INTRUDER, OPS_MEMBER, OTHER_GROUP]
EVENTS = st.one_of(
    st.builds(
        Vote,
        principal=st.sampled_from(PRINCIPALS),
        approve=st.booleans(),
        scope=st.sampled_from(["once", "run", "always", "bogus"]),
    ),
    st.just(Expire()),
    st.just(Cancel()),
    st.just(Remind()),
)


@given(
    events=st.lists(st.tuples(EVENTS, st.integers(min_value=0, max_value=90)), max_size=12),
    quorum=st.integers(min_value=1, max_value=3),
    allow_self=st.booleans(),
    scopes=st.sampled_from([("once", "run"), ("once", "run", "always")]),
)
def test_invariants_hold_for_any_event_sequence(
    events: list[tuple[LifecycleEvent, int]], quorum: int, allow_self: bool, scopes: tuple[Scope, ...]
) -> None:
    approvers = replace(sample_request().approvers, quorum=quorum, allow_self_approval=allow_self)
    request = sample_request(approvers=approvers, scopes=scopes)
    original, now = request, EPOCH
    for event, seconds in events:
        now += timedelta(seconds=seconds)
        after = transition(request, event, now)
        if request.terminal:
            assert not isinstance(after, ApprovalRequest)  # terminal states never change
        if not isinstance(after, ApprovalRequest):
            continue
        request = after
        assert (request.id, request.digest, request.action, request.nonce) == (
            original.id,
            original.digest,
            original.action,
            original.nonce,
        )
        assert len(set(request.approvals_so_far)) == len(request.approvals_so_far)
        for voter in request.approvals_so_far:
            principal = next(p for p in PRINCIPALS if p.id == voter)
            assert authorise(request, principal, approve=True) is None
        if request.status == "approved":
            assert len(request.approvals_so_far) >= quorum
            assert request.decision_scope in scopes
            assert request.decided_at is not None
            assert request.decided_at < request.expires_at
        if request.status == "denied":
            assert request.decided_by in {p.id for p in PRINCIPALS if request.approvers.lists(p)}
