"""Value types of the loopback provider server: what a request looked like, what to answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Api = Literal["chat", "responses", "messages"]


@dataclass
class WireMessage:
    """One conversation entry, the same shape whichever API carried it.

    `role="tool"` entries are tool results: `call_id` names the call, `text` is its output.
    """

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    call_id: str = ""


@dataclass
class ProviderRequest:
    """A request as the server understood it; `raw` keeps the JSON body for anything else."""

    api: Api
    model: str
    system: str
    messages: list[WireMessage]
    tools: list[str]
    raw: dict[str, Any]
    stream: bool
    received_at: float = 0.0  # time.monotonic() when the request arrived (Retry-After checks)
    headers: Mapping[str, str] = field(default_factory=dict)

    def tool_schema(self, name: str) -> dict[str, Any] | None:
        """The JSON Schema of the offered tool `name`, whichever API shape carried it."""
        for tool in self.raw.get("tools") or []:
            fn = tool.get("function", tool)  # Chat Completions nests under "function"
            if fn.get("name") == name:
                schema = fn.get("parameters", fn.get("input_schema"))
                return schema if isinstance(schema, dict) else {}
        return None

    def last_user_text(self) -> str:
        """Text of the last user message ('' if none)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.text
        return ""

    def text_chars(self) -> int:
        """Characters of prompt text, for the ~4-chars-per-token usage estimate."""
        total = len(self.system)
        for m in self.messages:
            total += len(m.text) + sum(len(n) + len(str(a)) for n, a in m.tool_calls)
        return total


@dataclass
class Reply:
    """What the server answers. Tool arguments given as `str` are sent verbatim (invalid JSON tests).

    Error injection: `error` (HTTP status) with `retry_after` (seconds, `Retry-After` header) or
    `retry_after_ms` (`retry-after-ms` header); `delay` before the first byte; `hang` keeps the
    connection open without finishing (streams send their first text piece first); `disconnect`
    drops the connection halfway through a stream; `truncated` ends as if max tokens were reached.

    Faults of a broken provider (HTTP 200 every time): `hang_before_headers` accepts the request and
    never answers; `cut` ends the body cleanly halfway (no `finish_reason`, `[DONE]`,
    `response.completed` or `message_stop`); `malformed="html"` answers a 200 HTML page instead of
    the API's body, `malformed="data"` an event stream (or body) whose data is not JSON,
    `malformed="shape"` a stream of JSON events of no known shape; `keepalive`
    (seconds) sends the first half of a stream, then only keep-alives (SSE comments, Anthropic
    `ping` events) at that interval, forever. `finish_reason` overrides how the reply ends, as each
    API spells it (`""` sends null): Chat Completions `finish_reason`, Messages `stop_reason`,
    Responses `incomplete_details.reason` (the response is then `incomplete`).
    """

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    error: int | None = None
    retry_after: float | None = None
    retry_after_ms: float | None = None
    delay: float = 0.0
    hang: bool = False
    disconnect: bool = False
    truncated: bool = False
    usage: tuple[int, int] | None = None
    hang_before_headers: bool = False
    cut: bool = False
    malformed: Literal["html", "data", "shape"] | None = None
    keepalive: float | None = None
    finish_reason: str | None = None


Handler = Callable[[ProviderRequest], "Reply | Awaitable[Reply]"]
