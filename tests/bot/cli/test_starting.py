"""The port answers from a process's first second: alive at once, ready (and Slack's) only once it serves."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.cli.starting import Starting


def _serving_app() -> web.Application:
    async def ready(_: web.Request) -> web.Response:
        return web.json_response({"ready": True})

    async def events(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/readyz", ready)
    app.router.add_post("/slack/events", events)
    return app


async def test_the_port_says_alive_and_starting_then_hands_every_request_to_the_real_app() -> None:
    starting = Starting()
    client: TestClient[Any, Any] = TestClient(TestServer(starting.application()))
    async with client:
        starting.enter("recovering runs")
        alive = await client.get("/healthz")
        assert (alive.status, await alive.json()) == (200, {"ok": True, "starting": "recovering runs"})
        unready = await client.get("/readyz")
        report = {"ready": False, "starting": "recovering runs"}
        assert (unready.status, await unready.json()) == (503, report)
        assert unready.headers["Retry-After"] == "1"
        early = await client.post("/slack/events", data=b"{}")
        assert early.status == 503  # Slack retries; no listener exists yet to take it
        assert not starting.serving

        starting.serve(_serving_app())
        ready = await client.get("/readyz")
        assert (ready.status, await ready.json()) == (200, {"ready": True})
        taken = await client.post("/slack/events", data=b"{}")
        assert (taken.status, await taken.json()) == (200, {"ok": True})
        assert (await client.get("/nowhere")).status == 404  # the real app's routes only
        assert (await client.get("/slack/events")).status == 405
