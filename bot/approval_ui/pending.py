"""The one "pending for this user" query: what `/massgen approvals`, the App Home and the CLI list."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from approvals import ApprovalRequest, ApprovalService, Principal, authorise

# (user id, candidate group ids) -> the groups the user is in; None: no trusted lookup (the CLI).
GroupsOf = Callable[[str, Iterable[str]], Awaitable[frozenset[str]]]


async def principal_for(user: str, request: ApprovalRequest | None, groups_of: GroupsOf | None) -> Principal:
    """The user with the groups (among those `request` names) a trusted lookup says they are in."""
    groups: frozenset[str] = frozenset()
    named = request.approvers.groups if request is not None else frozenset()
    if groups_of is not None and named and request is not None and user not in request.approvers.users:
        groups = await groups_of(user, named)
    return Principal(id=user, groups=groups)


async def pending_for(
    service: ApprovalService, user: str, *, groups_of: GroupsOf | None = None, run_id: str | None = None
) -> list[ApprovalRequest]:
    """Pending requests `user` may approve (directly or through a group), oldest first."""
    mine = []
    for request in await service.pending(run_id=run_id):
        principal = await principal_for(user, request, groups_of)
        if authorise(request, principal, approve=True) is None:
            mine.append(request)
    return mine
