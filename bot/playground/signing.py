"""Sign requests the way Slack does, for HTTP-mode tests of the Bolt app."""

from __future__ import annotations

import hashlib
import hmac
import time


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Headers Slack sends with a request: `v0=` + HMAC-SHA256 of `v0:{timestamp}:{body}`."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + ts.encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Signature": f"v0={digest}", "X-Slack-Request-Timestamp": ts}
