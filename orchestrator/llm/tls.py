"""One TLS context for every SDK client of the process.

Each SDK client left to itself builds its own HTTP transport and with it a TLS context, parsing the
CA bundle again (about 0.1 s of CPU each on the bench machine, on the event loop, before the first
request of a team with three agents). The context is built once, in the loader thread right after
an SDK's import (`factory.preload_sdks`, `deferred.py`), with the HTTP library's own defaults
(`SSL_CERT_FILE`/`SSL_CERT_DIR` honoured), and shared: an `ssl.SSLContext` serves any number of
connections.
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's TLS context for model providers (built on first use)."""
    import httpx2

    return httpx2.create_ssl_context()
