"""App Home: the pending approvals this user may decide (with their buttons) and recent runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from approvals import ApprovalRequest
from bot.approval_ui.presenter import approval_view
from bot.home.blocks import RunSummary, home_view
from bot.slack.outbox import Outbox
from bot.tasks import TaskSupervisor


class RecentRuns(Protocol):
    """The latest runs, newest first."""

    async def __call__(self, *, limit: int) -> Sequence[RunSummary]:
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
    ) -> None:
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
        runs = await self._recent_runs(limit=10)
        view = home_view(mine, runs, now=self._clock())
        await self._outbox.call("views.publish", user_id=user, view=view)

    async def opened(self, user: str) -> None:
        """`app_home_opened`: remember the viewer, then publish."""
        self.viewers.add(user)
        await self.publish(user)

    def refresh(self, request: ApprovalRequest) -> None:
        """Republish the Home tab of listed approvers who use it (a views.publish each, Tier 4)."""
        for user in sorted(self.viewers & request.approvers.users):
            self._tasks.spawn(self.publish(user), name=f"home:{user}")
