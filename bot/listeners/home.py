"""App Home: the pending approvals this user may decide (with their buttons) and recent runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from approvals.lifecycle import authorise
from bot.approvals_ui import approval_view
from bot.render.blocks import home_view

if TYPE_CHECKING:
    from bot.wiring import Services


async def publish_home(services: Services, user: str) -> None:
    """Render and publish the Home tab for `user`."""
    mine = []
    for request in await services.approvals.pending():
        principal = await services.approvals_ui.principal(user, request)
        if authorise(request, principal, approve=True) is None:
            mine.append(approval_view(request))
    runs = await services.store.recent_runs(limit=10)
    view = home_view(mine, runs, now=services.clock())
    await services.outbox.call("views.publish", user_id=user, view=view)
