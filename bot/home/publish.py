"""App Home: the pending approvals this user may decide (with their buttons) and recent runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from approvals import ApprovalRequest
from bot.approval_ui.pending import GroupsOf
from bot.approval_ui.presenter import approval_view
from bot.home.access import ChannelAccess
from bot.home.blocks import RunSummary, home_view, refused_view
from bot.slack.outbox import Outbox
from bot.tasks import TaskSupervisor


class VisibleRun(RunSummary, Protocol):
    """A run the Home tab lists, and who asked for it (to show people their own runs)."""

    @property
    def requester(self) -> str | None: ...


class RecentRuns(Protocol):
    """The latest runs, newest first."""

    async def __call__(self, *, limit: int) -> Sequence[VisibleRun]:
        """At most `limit` runs."""
        ...


class HomeTab:
    """Publishes the Home tab, and republishes it for the users who use it when an ask changes."""

    def __init__(
        self,
        *,
        pending: Callable[[str], Awaitable[list[ApprovalRequest]]],
        recent_runs: RecentRuns,
        outbox: Outbox,
        tasks: TaskSupervisor,
        clock: Callable[[], float],
        access: ChannelAccess,
        groups_of: GroupsOf | None = None,
    ) -> None:
        self._access = access
        self._groups_of = groups_of  # approvers through a group are refreshed too
        self._pending = pending
        self._recent_runs = recent_runs
        self._outbox = outbox
        self._tasks = tasks
        self._clock = clock
        # Users who opened the Home tab: their Home is republished when an ask they may decide changes.
        self.viewers: set[str] = set()

    async def publish(self, user: str) -> None:
        """Render and publish the Home tab for `user`."""
        mine = [approval_view(request) for request in await self._pending(user)]
        runs = await self._visible_runs(user)
        view = home_view(mine, runs, now=self._clock())
        await self._outbox.call("views.publish", user_id=user, view=view)

    async def _visible_runs(self, user: str, *, show: int = 10, scan: int = 50) -> list[VisibleRun]:
        """The newest runs `user` may see: their own, public channels', and their channels' (see access)."""
        shown: list[VisibleRun] = []
        for run in await self._recent_runs(limit=scan):
            if await self._access.may_see(user, run):
                shown.append(run)
                if len(shown) == show:
                    break
        return shown

    async def refuse(self, user: str, text: str) -> None:
        """The Home tab of someone the bot does not serve: why, and nothing else (no runs, no asks)."""
        await self._outbox.call("views.publish", user_id=user, view=refused_view(text))

    async def opened(self, user: str) -> None:
        """`app_home_opened`: remember the viewer, then publish."""
        self.viewers.add(user)
        await self.publish(user)

    def refresh(self, request: ApprovalRequest) -> None:
        """Republish the Home tab of approvers who use it, listed or in a group (views.publish, Tier 4)."""
        listed = self.viewers & request.approvers.users
        for user in sorted(listed):
            self._tasks.spawn(self.publish(user), name=f"home:{user}")
        others = self.viewers - listed
        if request.approvers.groups and others and self._groups_of is not None:
            self._tasks.spawn(self._refresh_members(request.approvers.groups, others), name="home:groups")

    async def _refresh_members(self, groups: frozenset[str], users: set[str]) -> None:
        """Republish for the viewers in one of `groups` (membership is cached per group)."""
        assert self._groups_of is not None
        for user in sorted(users):
            if await self._groups_of(user, groups):
                await self.publish(user)
