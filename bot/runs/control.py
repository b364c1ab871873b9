"""Who may control a run (Cancel, Finish now): its requester or one of its team's approvers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from approvals import Principal
from orchestrator import TeamConfig

GroupsOf = Callable[[str, Iterable[str]], Awaitable[frozenset[str]]]


async def may_control(user: str, *, requester: str, team: TeamConfig, groups_of: GroupsOf) -> bool:
    """True when `user` started the run or approves for its team (directly or through a group)."""
    approvals = team.approvals
    if user == requester or user in approvals.approvers:
        return True
    if not approvals.approver_groups:
        return False
    principal = Principal(id=user, groups=await groups_of(user, approvals.approver_groups))
    return bool(principal.groups & set(approvals.approver_groups))
