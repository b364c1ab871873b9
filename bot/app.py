"""The Bolt `AsyncApp` with every listener, and the aiohttp application that serves it over HTTP."""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import TYPE_CHECKING, Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.web.async_client import AsyncWebClient

from bot.listeners import actions, commands, events, outsiders, views
from bot.ops import CONTENT_TYPE, bind_request

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

    @app.middleware
    async def bind_request_id(body: dict[str, Any], next: Any) -> Any:
        """Every record logged while handling this request (and its tasks) carries its id."""
        bind_request(_request_id(body))
        return await next()

    outsiders.register(app, services)  # before any listener runs: users of other workspaces stop here
    commands.register(app, services)
    actions.register(app, services)
    views.register(app, services)
    events.register(app, services)

    @app.error
    async def on_error(error: Exception, body: dict[str, Any]) -> None:
        log.error("listener failed on %s", body.get("type"), exc_info=error)

    return app


def _request_id(body: dict[str, Any]) -> str:
    """Slack's own id for the delivery when it has one (events), else the interaction's, else new."""
    for key in ("event_id", "trigger_id"):
        if isinstance(body.get(key), str):
            return str(body[key])
    return f"req-{secrets.token_hex(6)}"


def build_web_app(app: AsyncApp, services: Services) -> web.Application:
    """`POST /slack/events` (events, interactivity, slash commands) and `GET /healthz`."""

    async def slack_events(request: web.Request) -> web.Response:
        # Bolt parses the body as it builds the request and its context; what it cannot parse
        # (not UTF-8, a `payload` that is not a JSON object, an `event` that is not one) raises
        # out of it. Listener errors never do (Bolt answers those itself), so what raises here is
        # the request's fault: 400 and one line, never a 500 with a traceback.
        try:
            bolt_request = await to_bolt_request(request)
            if not isinstance(bolt_request.body, dict):
                raise TypeError(f"the body is a {type(bolt_request.body).__name__}, not an object")
            response = await app.async_dispatch(bolt_request)
        except Exception as exc:
            log.warning("malformed Slack request refused: %s: %s", type(exc).__name__, str(exc)[:200])
            return web.json_response({"error": "malformed request body"}, status=400)
        return await to_aiohttp_response(response)

    web_app = web.Application()
    web_app.router.add_post(EVENTS_PATH, slack_events)
    add_health_routes(web_app, services)
    return web_app


def build_health_app(services: Services) -> web.Application:
    """Only `GET /healthz` and `GET /readyz`: served beside Socket Mode, which has no HTTP listener."""
    web_app = web.Application()
    add_health_routes(web_app, services)
    return web_app


def add_health_routes(web_app: web.Application, services: Services) -> None:
    """`/healthz`: alive; `/readyz`: 503 until Slack auth, the database and every check answer;
    `/metrics`: Prometheus."""

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response(_health(services))

    async def readyz(_: web.Request) -> web.Response:
        report = _health(services)
        database = await services.storage.ping()
        report["database"] = "ok" if database is None else database
        ready = report["slack_auth"] == "ok" and database is None
        for name, check in sorted(services.ready_checks.items()):
            problem = await _check(check)
            report[name] = "ok" if problem is None else problem
            ready = ready and problem is None
        report["ready"] = ready
        return web.json_response(report, status=200 if ready else 503)

    async def metrics(_: web.Request) -> web.Response:
        try:
            async with asyncio.timeout(5):
                await services.metrics.refresh(services.storage.engine, services.approvals)
        except Exception as exc:  # the counters still tell something; the gauges keep their last values
            log.warning("metrics: the database did not answer (%s)", type(exc).__name__)
        return web.Response(body=services.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    web_app.router.add_get("/healthz", healthz)
    web_app.router.add_get("/readyz", readyz)
    web_app.router.add_get("/metrics", metrics)


async def _check(check: Any) -> str | None:
    try:
        async with asyncio.timeout(5):
            result: str | None = await check()
    except Exception as exc:  # a check that fails is a reason, not a crash of /readyz
        return f"{type(exc).__name__}: {exc}"[:200]
    return result


def _health(services: Services) -> dict[str, Any]:
    # The model SDKs are warmed before any listener starts (build_services), so serving means warmed.
    return {
        "ok": True,
        "slack_auth": "ok" if services.identity.get("user_id") else "failed (auth.test did not answer)",
        "models": "warmed",
        "active_runs": len(services.runs.supervisor.active_runs()),
    }
