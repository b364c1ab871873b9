"""Logging for operations: run and request ids on every record, JSON lines on demand, no secrets.

`bind_run(run_id)` and `bind_request(request_id)` set context variables; asyncio copies the context
into every task created afterwards, so an agent's task, a click's task and the records they log
carry the ids without passing them around. `configure_logging` installs one handler on the root
logger with the context filter and the redaction filter, whose output is text or one JSON object a
line (`MASSGEN_LOG_FORMAT=json`).
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

RUN_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("massgen_run_id", default=None)
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("massgen_request_id", default=None)
REDACTED = "[redacted]"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [run=%(run_id)s req=%(request_id)s]: %(message)s"

# Shapes of credentials even when their value is not known to this process: Slack tokens
# (xoxb-, xoxp-, xapp-, ...), OpenAI and Anthropic keys, bearer headers. Linear patterns only.
_SHAPES = re.compile(
    r"\bxox[abposr]-[A-Za-z0-9-]{8,}|\bxapp-[A-Za-z0-9-]{8,}|\bsk-[A-Za-z0-9_-]{16,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}"
)
# Environment variables whose values are secrets wherever they appear (the signing secret has no shape).
_SECRET_NAMES = re.compile(r"(TOKEN|SECRET|API_KEY|PASSWORD)$")
_MIN_SECRET = 8  # shorter values would redact ordinary words


def bind_run(run_id: str | None) -> contextvars.Token[str | None]:
    """Every record logged from here (and from tasks created from here) carries `run_id`."""
    return RUN_ID.set(run_id)


def bind_request(request_id: str | None) -> contextvars.Token[str | None]:
    """Every record logged while handling this request carries `request_id`."""
    return REQUEST_ID.set(request_id)


def bound_request() -> str | None:
    """The request id bound here (to carry it where the context does not go, e.g. an engine step)."""
    return REQUEST_ID.get()


class ContextFilter(logging.Filter):
    """Adds `run_id` and `request_id` from the context to each record ("-" when unset)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.run_id = RUN_ID.get() or getattr(record, "run_id", None) or "-"
        record.request_id = REQUEST_ID.get() or getattr(record, "request_id", None) or "-"
        return True


class RedactFilter(logging.Filter):
    """Replaces known secret values and credential shapes in the message, its args and the traceback.

    The record's message is rendered once here (`msg % args`) and redacted, so no formatter or
    handler after it sees the raw arguments.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        values = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True)
        self._values = values

    def redact(self, text: str) -> str:
        """`text` without the secrets."""
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return _SHAPES.sub(REDACTED, text)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        record.exc_info = None  # the redacted text stands in for it
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


def secrets_from_environment(environ: dict[str, str] | None = None) -> list[str]:
    """Values of variables named like secrets (`*_TOKEN`, `*_SECRET`, `*_API_KEY`, `*_PASSWORD`)."""
    env = os.environ if environ is None else environ
    return [value.strip() for name, value in env.items() if _SECRET_NAMES.search(name) and value.strip()]


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, run and request ids, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "run_id": getattr(record, "run_id", "-"),
            "request_id": getattr(record, "request_id", "-"),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(
    level: str = "INFO", *, fmt: str = "text", secrets: Iterable[str] = (), stream: TextIO | None = None
) -> logging.Handler:
    """Replace the root logger's handlers with one that adds ids, redacts, and writes text or JSON."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactFilter([*secrets, *secrets_from_environment()]))
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler


__all__ = [
    "REDACTED",
    "REQUEST_ID",
    "RUN_ID",
    "ContextFilter",
    "JsonFormatter",
    "RedactFilter",
    "bind_request",
    "bind_run",
    "configure_logging",
    "secrets_from_environment",
]
