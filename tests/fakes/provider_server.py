"""A loopback model provider speaking Chat Completions, Responses and Anthropic Messages.

    async with ProviderServer(scripted(Reply(text="hi"))) as server:
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="x")
        ...
        assert server.requests[0].model == "gpt-x"

Routes: `POST /v1/chat/completions`, `POST /v1/responses` (OpenAI SDK `base_url` =
`openai_base_url`) and `POST /v1/messages` (Anthropic SDK `base_url` = `anthropic_base_url`),
streaming and not. The handler decides each reply (`Reply`, see `provider_types.py` for error,
delay, hang, disconnect, cut, malformed-body and keep-alive injection); the default is
`protocol_agent`, a deterministic MassGen agent. Standalone:
`python -m tests.fakes.provider_server --port 8765`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import math
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Literal

from aiohttp import web

from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_encode import encode_body, encode_error, encode_stream
from tests.fakes.provider_types import Api, Handler, ProviderRequest, Reply, WireMessage
from tests.fakes.provider_wire import parse_request

__all__ = ["Handler", "ProviderRequest", "ProviderServer", "Reply", "WireMessage", "scripted"]

_HTML_PAGE = "<html><head><title>Welcome</title></head><body>The gateway is up.</body></html>\n"
_ANTHROPIC_PING = b'event: ping\ndata: {"type": "ping"}\n\n'
_ROUTES: dict[str, Api] = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}


def scripted(*replies: Reply | Mapping[str, Sequence[Reply]]) -> Handler:
    """Replay replies in order; given one `{model: [replies]}` mapping, replay per model name.

    A request past the end of the script gets HTTP 400 (not retryable) naming the model.
    """
    if len(replies) == 1 and isinstance(replies[0], Mapping):
        queues = {model: list(seq) for model, seq in replies[0].items()}
    else:
        queues = {"": [r for r in replies if isinstance(r, Reply)]}

    def handler(request: ProviderRequest) -> Reply:
        queue = queues.get(request.model if request.model in queues else "")
        if not queue:
            raise LookupError(f"script exhausted for model {request.model!r}")
        return queue.pop(0)

    return handler


def estimate_tokens(chars: int) -> int:
    """~4 characters per token, at least 1."""
    return max(1, math.ceil(chars / 4))


class ProviderServer:
    """The server. `requests`: every request, in order. `disconnects`: responses the client abandoned
    before they were complete (timeouts, cancellation); server-injected drops do not count."""

    def __init__(self, handler: Handler | None = None, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.handler: Handler = handler or protocol_agent
        self.requests: list[ProviderRequest] = []
        self.prompt_tokens_total = 0
        self.disconnects = 0
        self.handler_errors: list[BaseException] = []
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._complete: set[int] = set()  # ids of requests whose stream reached its end
        self._changed = asyncio.Condition()

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind and serve; a random free port unless one was given."""
        app = web.Application()
        for path in _ROUTES:
            app.router.add_post(path, self._handle)
        # handler_cancellation: a client that hangs up cancels the handler, which is how a
        # hanging stream learns of the disconnect.
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Release hanging handlers and stop serving."""
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ProviderServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def port(self) -> int:
        return self._port

    @property
    def openai_base_url(self) -> str:
        return f"http://{self._host}:{self._port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def wait_for(self, *, requests: int = 0, disconnects: int = 0, timeout: float = 5.0) -> None:
        """Wait until at least this many requests / disconnects were seen; TimeoutError otherwise."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(
                lambda: len(self.requests) >= requests and self.disconnects >= disconnects
            )

    # --- request handling -----------------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _handle(self, http: web.Request) -> web.StreamResponse:
        api = _ROUTES[http.path]
        try:
            request = parse_request(
                api,
                await http.json(),
                received_at=time.monotonic(),
                headers={k.lower(): v for k, v in http.headers.items()},
            )
        except ValueError as exc:  # includes JSONDecodeError
            return web.json_response(encode_error(api, 400, str(exc)), status=400)
        self.requests.append(request)
        input_tokens = estimate_tokens(request.text_chars())
        self.prompt_tokens_total += input_tokens
        await self._notify()
        try:
            reply = self.handler(request)
            if inspect.isawaitable(reply):
                reply = await reply
        except Exception as exc:  # a broken script must surface, not hang the client
            self.handler_errors.append(exc)
            message = f"fake provider handler failed: {exc!r}"
            return web.json_response(encode_error(api, 400, message), status=400)
        assert isinstance(reply, Reply)
        try:
            return await self._respond(http, request, reply, input_tokens)
        except (asyncio.CancelledError, ConnectionResetError):
            # Only an abandoned response counts: a client closing right after the last frame does not.
            if not self._closing.is_set() and id(http) not in self._complete:
                self.disconnects += 1
                await asyncio.shield(self._notify())
            raise
        finally:
            self._complete.discard(id(http))

    async def _respond(
        self, http: web.Request, request: ProviderRequest, reply: Reply, input_tokens: int
    ) -> web.StreamResponse:
        if reply.delay:
            await asyncio.sleep(reply.delay)  # simulated provider latency, not a test wait
        if reply.hang_before_headers:
            await self._closing.wait()  # or, sooner, cancelled when the client gives up
            return web.Response(status=503)
        if reply.error is not None:
            headers = {}
            if reply.retry_after is not None:
                headers["retry-after"] = f"{reply.retry_after:g}"
            if reply.retry_after_ms is not None:
                headers["retry-after-ms"] = f"{reply.retry_after_ms:g}"
            body = encode_error(request.api, reply.error, f"injected error {reply.error}")
            return web.json_response(body, status=reply.error, headers=headers)
        if reply.malformed is not None:
            return await self._malformed(http, request, reply.malformed)
        output_chars = len(reply.text) + sum(len(n) + len(json.dumps(a)) for n, a in reply.tool_calls)
        usage = reply.usage or (input_tokens, estimate_tokens(output_chars))
        if not request.stream:
            if reply.hang:
                await self._closing.wait()
            text = json.dumps(encode_body(request, reply, usage))
            if reply.cut:
                text = text[: len(text) // 2]
            return web.Response(text=text, content_type="application/json")
        return await self._stream(http, request.api, encode_stream(request, reply, usage), reply)

    async def _malformed(
        self, http: web.Request, request: ProviderRequest, kind: Literal["html", "data", "shape"]
    ) -> web.StreamResponse:
        """HTTP 200 with what a misbehaving proxy or server sends instead of the API's body."""
        if kind == "html":
            return web.Response(text=_HTML_PAGE, content_type="text/html")
        if not request.stream:
            return web.Response(text='{"id": "x", "choices": [{"ind', content_type="application/json")
        event = "event: message_start\n" if request.api == "messages" else ""
        data = '{"unexpected": true}' if kind == "shape" else "<html>upstream said no</html>"
        frame = f"{event}data: {data}\n\n".encode()
        return await self._stream(http, request.api, [frame], Reply())

    async def _stream(
        self, http: web.Request, api: Api, frames: list[bytes], reply: Reply
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
        )
        await response.prepare(http)
        # Faults stop halfway: past the first content delta for any non-empty reply.
        partial = reply.hang or reply.disconnect or reply.cut or reply.keepalive is not None
        for frame in frames[: len(frames) // 2 + 1] if partial else frames:
            await response.write(frame)
        if reply.disconnect:
            assert http.transport is not None
            http.transport.abort()  # mid-stream drop: the chunked body never terminates
            return response
        if reply.keepalive is not None:
            await self._keep_alive(response, api, reply.keepalive)
            return response
        if reply.hang:
            await self._closing.wait()
            return response
        self._complete.add(id(http))
        await response.write_eof()  # for `cut`: a clean end, but before the stream's last events
        return response

    async def _keep_alive(self, response: web.StreamResponse, api: Api, interval: float) -> None:
        """Send keep-alives (and nothing else) until the client hangs up or the server closes."""
        frame = _ANTHROPIC_PING if api == "messages" else b": keep-alive\n\n"
        while not self._closing.is_set():
            await response.write(frame)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), interval)  # simulated provider pacing


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Loopback model provider (default: MassGen protocol agent).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)

    async def serve() -> None:
        async with ProviderServer(host=args.host, port=args.port) as server:
            print(f"OPENAI_BASE_URL={server.openai_base_url}", flush=True)
            print(f"ANTHROPIC_BASE_URL={server.anthropic_base_url}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
