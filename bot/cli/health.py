"""`massgen-bot health [--ready]`: the container health check, in HTTP and Socket Mode alike.

Both modes serve `/healthz` and `/readyz` on `$PORT` (Socket Mode beside its WebSocket), so one
command checks either: exit 0 when the endpoint answers 200, else 1 with one line saying why.
Only the standard library is imported: a Docker `HEALTHCHECK` runs it every 30 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.request
from typing import Any


def register(subparsers: Any) -> None:
    """Add `health`."""
    health = subparsers.add_parser("health", help="check a running bot's /healthz (or /readyz) on $PORT")
    health.add_argument("--ready", action="store_true", help="check /readyz (database, Slack, engine)")
    health.add_argument("--port", type=int, default=None, help="the bot's port (default $PORT or 3000)")
    health.add_argument("--host", default="127.0.0.1", help="the bot's address (default 127.0.0.1)")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds to wait (default 3)")
    health.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    port = args.port if args.port is not None else int(os.environ.get("PORT") or 3000)
    url = f"http://{args.host}:{port}/{'readyz' if args.ready else 'healthz'}"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        print(f"massgen-bot: health: {url}: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"massgen-bot: health: {url}: HTTP {status}", file=sys.stderr)
        return 1
    return 0
