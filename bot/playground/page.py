"""The playground's page: the static front end, its JSON state, live updates (SSE) and the people's actions.

Routes sit beside the emulator's Web API on the same loopback server (`/` and `/static/*` for the page,
`/ui/*` for it to read and act). The server binds 127.0.0.1 only; on top of that every `/ui/*` request
must name this server in `Host` (a DNS-rebinding page cannot) and, when it sends `Origin`, come from
this server, and actions must be JSON (a cross-site form cannot send that without a preflight we never
grant): another web page open in the same browser cannot click Approve as the approver.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from bot.playground.guide import Guide
from bot.playground.workspace import PlaygroundError, Workspace

log = logging.getLogger(__name__)

KEEPALIVE = 15.0  # seconds between SSE comments, so proxies and browsers keep the stream open
_STATIC = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "blocks.js": "text/javascript",
    "style.css": "text/css",
}
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Page:
    """The page server's handlers over one `Workspace`, with the `Guide` its header and suggestions show."""

    def __init__(self, workspace: Workspace, guide: Guide) -> None:
        self.workspace = workspace
        self.slack = workspace.slack
        self.guide = guide

    def routes(self, app: web.Application) -> None:
        """Add the page's routes to the emulator's application."""
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/ui/state", self._guarded(self._state))
        app.router.add_get("/ui/events", self._guarded(self._events))
        app.router.add_post("/ui/send", self._guarded(self._send))
        app.router.add_post("/ui/click", self._guarded(self._click))
        app.router.add_post("/ui/submit", self._guarded(self._submit))
        app.router.add_post("/ui/close", self._guarded(self._close))
        app.router.add_post("/ui/home", self._guarded(self._home))

    # -- guards ----------------------------------------------------------------------------------

    def _own_hosts(self) -> set[str]:
        port = self.slack.port
        return {f"127.0.0.1:{port}", f"localhost:{port}"}

    def refusal(self, request: web.Request) -> str | None:
        """Why a `/ui/*` request is not from this page (None: it is)."""
        hosts = self._own_hosts()
        if request.headers.get("Host", "") not in hosts:
            return "wrong Host"
        origin = request.headers.get("Origin")
        if origin is not None and origin.removeprefix("http://") not in hosts:
            return "cross-origin request"
        if request.method == "POST" and request.content_type != "application/json":
            return "actions must be JSON"
        return None

    def _guarded(self, handler: _Handler) -> _Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if (problem := self.refusal(request)) is not None:
                log.warning("playground: refused %s %s: %s", request.method, request.path, problem)
                return web.json_response({"ok": False, "error": problem}, status=403)
            try:
                return await handler(request)
            except (PlaygroundError, KeyError, TypeError, ValueError) as exc:
                return web.json_response({"ok": False, "error": str(exc)}, status=400)

        return guarded

    # -- static ----------------------------------------------------------------------------------

    async def _index(self, request: web.Request) -> web.Response:
        return _file("index.html")

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        return _file(name)

    # -- reads -----------------------------------------------------------------------------------

    async def _state(self, request: web.Request) -> web.Response:
        user = request.query.get("user") or self.workspace.people[0].id
        return web.json_response({**self.workspace.state(user), "guide": await self.guide.state()})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: `change` with the revision whenever the workspace changes."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        seen = -1
        try:
            while not self.slack.closing:
                if self.slack.revision != seen:
                    seen = self.slack.revision
                    await response.write(f"event: change\ndata: {seen}\n\n".encode())
                try:
                    await self.slack.wait_for(functools.partial(self._moved, seen), KEEPALIVE)
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
        except ConnectionError:  # the tab was closed or reloaded: an ordinary end, not an error
            log.debug("playground: a page closed its event stream")
        return response

    def _moved(self, seen: int) -> bool:
        return self.slack.revision != seen or self.slack.closing

    # -- actions ---------------------------------------------------------------------------------

    async def _send(self, request: web.Request) -> web.Response:
        data = await _body(request)
        thread = data.get("thread_ts")
        problem = await self.workspace.send(
            str(data["user"]), str(data["text"]), thread_ts=str(thread) if thread else None
        )
        return _done(problem)

    async def _click(self, request: web.Request) -> web.Response:
        data = await _body(request)
        problem = await self.workspace.click(
            str(data["user"]),
            action_id=str(data["action_id"]),
            block_id=str(data.get("block_id") or ""),
            value=str(data.get("value") or ""),
            message_ts=_opt(data.get("message_ts")),
            view_id=_opt(data.get("view_id")),
        )
        return _done(problem)

    async def _submit(self, request: web.Request) -> web.Response:
        data = await _body(request)
        values = data.get("values") or {}
        if not isinstance(values, dict):
            raise ValueError("values must be an object")
        errors = await self.workspace.submit(str(data["user"]), str(data["view_id"]), values)
        return web.json_response({"ok": errors is None, "errors": errors or {}})

    async def _close(self, request: web.Request) -> web.Response:
        data = await _body(request)
        await self.workspace.close_view(str(data["user"]), str(data["view_id"]))
        return _done(None)

    async def _home(self, request: web.Request) -> web.Response:
        data = await _body(request)
        await self.workspace.open_home(str(data["user"]))
        return _done(None)


async def _body(request: web.Request) -> dict[str, Any]:
    data = json.loads(await request.text() or "{}")
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    return data


def _opt(value: Any) -> str | None:
    return str(value) if value else None


def _done(problem: str | None) -> web.Response:
    return web.json_response({"ok": problem is None, "problem": problem})


def _file(name: str) -> web.Response:
    text = resources.files("bot.playground").joinpath("static", name).read_text(encoding="utf-8")
    headers = {
        "Cache-Control": "no-store",
        # The page runs only its own scripts and styles and talks only to this server.
        "Content-Security-Policy": (
            "default-src 'none'; script-src 'self'; style-src 'self'; "
            "connect-src 'self'; img-src 'self' data:"
        ),
        "X-Content-Type-Options": "nosniff",
    }
    return web.Response(text=text, content_type=_STATIC[name], headers=headers)
