"""The port a serving process answers on from its first second, honestly, until it serves.

Building the services can take a while (the database, the engine, recovering a crashed
worker's runs, warming the model SDKs). Bound only after that, the port refuses connections
meanwhile, and a liveness probe cannot tell a process that is starting from one that hangs. So
`serve` binds it first: `/healthz` answers at once (alive, and which start-up phase it is in),
`/readyz` and everything else answer 503 with that phase ("starting: recovering runs") until the
process serves; from then on every request goes to the real application (`bot.app`), unchanged.

Only aiohttp is imported here: the port is bound before the Slack SDK is loaded.
"""

from __future__ import annotations

import logging

from aiohttp import web

log = logging.getLogger(__name__)


class Starting:
    """What the port says while the process starts, and where it sends requests once it serves."""

    def __init__(self) -> None:
        self.phase = "starting"
        self._serving: web.Application | None = None

    def enter(self, phase: str) -> None:
        """The start-up goes on to `phase` (what `/healthz` and `/readyz` report meanwhile)."""
        self.phase = phase
        log.info("starting: %s", phase)

    def serve(self, app: web.Application) -> None:
        """Start-up is done: every request from now on is `app`'s (its routes, its answers)."""
        app.freeze()
        self._serving = app

    @property
    def serving(self) -> bool:
        """Whether requests go to the real application yet."""
        return self._serving is not None

    def application(self) -> web.Application:
        """The application bound to the port for the whole life of the process."""
        web_app = web.Application()
        web_app.router.add_route("*", "/{path:.*}", self._handle)
        return web_app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._serving is None:
            return self._starting(request)
        match = await self._serving.router.resolve(request)  # a 404 / 405 match raises its error
        return await match.handler(request)

    def _starting(self, request: web.Request) -> web.Response:
        if request.method == "GET" and request.path == "/healthz":
            return web.json_response({"ok": True, "starting": self.phase})
        report = {"ready": False, "starting": self.phase}
        return web.json_response(report, status=503, headers={"Retry-After": "1"})


__all__ = ["Starting"]
