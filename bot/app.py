"""The Bolt `AsyncApp` with every listener, and the aiohttp application that serves it over HTTP."""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.web.async_client import AsyncWebClient

from bot.listeners import actions, commands, events, views

if TYPE_CHECKING:
    from bot.wiring import Services

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


def build_app(services: Services) -> AsyncApp:
    """A single-workspace Bolt app over the services' Web API client; listeners registered."""
    identity = services.identity

    async def authorize(enterprise_id: str | None, team_id: str | None, **_: Any) -> AuthorizeResult:
        """The bot token for every request (one workspace per process)."""
        # A static result instead of Bolt's per-process `auth.test` on the first request: that call
        # would sit before the first ack, and some Slack stand-ins do not implement it.
        return AuthorizeResult(
            enterprise_id=enterprise_id,
            team_id=team_id,
            bot_token=services.bot_token,
            bot_user_id=identity.get("user_id"),
            bot_id=identity.get("bot_id"),
        )

    # Listeners get per-request clients carrying the token from `authorize`; this one only lends its
    # base URL (SLACK_API_URL) to them and to Socket Mode's apps.connections.open.
    app = AsyncApp(
        client=AsyncWebClient(base_url=services.client.base_url),
        # Without a secret (Socket Mode only) a random one makes every HTTP request fail verification.
        signing_secret=services.signing_secret or secrets.token_hex(32),
        authorize=authorize,
        # Socket Mode requests are not signed; HTTP requests always are (no secret → refuse to serve).
        request_verification_enabled=True,
        ssl_check_enabled=True,
        url_verification_enabled=True,
    )
    commands.register(app, services)
    actions.register(app, services)
    views.register(app, services)
    events.register(app, services)

    @app.error
    async def on_error(error: Exception, body: dict[str, Any]) -> None:
        log.error("listener failed on %s", body.get("type"), exc_info=error)

    return app


def build_web_app(app: AsyncApp, services: Services) -> web.Application:
    """`POST /slack/events` (events, interactivity, slash commands) and `GET /healthz`."""

    async def slack_events(request: web.Request) -> web.Response:
        bolt_request = await to_bolt_request(request)
        return await to_aiohttp_response(await app.async_dispatch(bolt_request))

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"ok": True, "active_runs": len(services.runs.supervisor.active_runs())})

    web_app = web.Application()
    web_app.router.add_post(EVENTS_PATH, slack_events)
    web_app.router.add_get("/healthz", healthz)
    return web_app
