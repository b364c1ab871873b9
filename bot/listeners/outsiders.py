"""Users of another workspace (Slack Connect) are refused in one place: a global Bolt middleware.

It runs before every listener, so no surface can forget the check (issue 20; the rules are
`Workspaces.admits`). An outsider's request never reaches a listener (`next()` is not called):
the middleware acks with the surface's refusal itself, pure like every ack, and what needs a Web
API call or the database (an ephemeral, the Home tab, the audit of a refused approval) goes to a
supervised task after it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.response import BoltResponse

from bot.listeners import actions, events
from bot.listeners.workspaces import REFUSED, Workspaces, payload_teams, user_team
from bot.render import modal, safe
from bot.render.kit import section

if TYPE_CHECKING:
    from bot.wiring import Services

log = logging.getLogger(__name__)

REFUSED_MODAL = "massgen_refused"


def register(app: AsyncApp, services: Services) -> None:
    """Put the check in front of every listener (register it before them; it runs for all)."""
    workspaces = Workspaces.of(services.settings.slack_allowed_team_ids, services.identity)
    seen = events.SeenEvents()

    async def refuse_outsiders(
        body: dict[str, Any], ack: AsyncAck, next: Callable[[], Awaitable[BoltResponse]]
    ) -> BoltResponse:
        """Served people go on to the listeners; others get this surface's refusal and nothing else."""
        if workspaces.admits(body):
            return await next()
        surface = _surface(body)
        team = user_team(body) or payload_teams(body)[0] or "unknown"  # a slash command has no user team
        log.info("refused a %s by a user of another workspace (%s)", surface, team)
        if surface == "command":
            return await ack(text=REFUSED)
        if surface == "view_submission":  # the modal itself says why (there may be no channel)
            return await ack(response_action="update", view=refused_modal())
        response = await ack()
        work = _answer(services, body, surface, seen)
        if work is not None:
            services.tasks.spawn(work, name=f"refused:{surface}")
        return response

    app.use(refuse_outsiders)


def _surface(body: dict[str, Any]) -> str:
    """`command` for a slash command (its form has no `type`), else the payload's `type`."""
    if "command" in body and "type" not in body:
        return "command"
    kind = body.get("type")
    return kind if isinstance(kind, str) else "request"


def _answer(
    services: Services, body: dict[str, Any], surface: str, seen: events.SeenEvents
) -> Coroutine[Any, Any, None] | None:
    """What tells the outsider why, after the ack: a click's reply, a mention's or Home's refusal."""
    if surface == "block_actions":
        return actions.refuse(services, body)
    if surface == "event_callback" and seen.first_time(body.get("event_id")):  # once per redelivery
        return events.refuse(services, body)
    return None  # view_closed, shortcuts, suggestions: the ack is all


def refused_modal() -> dict[str, Any]:
    """The modal an outsider's submission is replaced with: the reason, and only Close."""
    return modal(REFUSED_MODAL, "MassGen", [section(safe(REFUSED))])
