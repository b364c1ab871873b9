"""A local Slack Web API emulator (aiohttp on loopback): the playground's workspace and the tests' Slack.

Point the real `AsyncWebClient(base_url=emulator.api_url)` at it. It records every call, answers
with Slack's response shapes, keeps messages per channel so `chat.update` of an unknown `ts`
fails like Slack does, enforces Slack's rate limits (HTTP 429 + `Retry-After`) and Block Kit
limits, and flags unescaped mentions. Anything the bot should never do becomes a *violation*;
`assert_clean()` (or the `slack_emulator` fixture) fails the test on one. Faults a test wants
(a 429, a 500 after the message was stored, a slow answer) are injected with `inject()` and are
not violations. `/socket` is a Socket Mode stand-in speaking Slack's envelope protocol; with
several connections open it hands each envelope to one of them, round robin, as Slack does.

Like real Slack it also enforces
- the token's scopes (default: the bot scopes of `deploy/slack-manifest.yml`): `missing_scope`,
  a violation, so a scope the manifest lacks fails the test;
- channel membership (`add_channel(..., bot_member=False)`): `chat.postEphemeral` and history
  reads answer `not_in_channel` (public) or `channel_not_found` (private, DMs); posting to a
  public channel the bot is not in needs `chat:write.public`;
- `trigger_id`s: `views.open`/`views.push` refuse one older than `trigger_ttl` (3 s) with
  `expired_trigger_id`, a reused one with `exchanged_trigger_id`, an unknown one with
  `invalid_trigger_id` (`issue_trigger()` makes one; the payload builders' ids carry their time);
- views over 250 kB: `view_too_large` (a violation: the bot must never send one);
- `response_url`s (`response_url(key, channel=, message_ts=, user=)`): 5 uses within 30 min,
  `replace_original`/`delete_original` act on the message clicked, ephemeral unless
  `response_type: in_channel`;
- `answer_late(method, delay)`: the call takes effect, the answer comes after `delay` (longer
  than the client's timeout, the client sees a timeout although the message exists).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

from bot.playground.blockkit import (
    find_mentions,
    iter_texts,
    validate_blocks,
    validate_text,
    validate_view,
)
from bot.playground.methods import (
    MethodsMixin,
    channel_kind,
    manifest_scopes,
    needed_scopes,
)

__all__ = [
    "ALL_SCOPES",
    "Call",
    "Fault",
    "Limits",
    "ResponseHook",
    "SlackEmulator",
    "manifest_scopes",
    "validate_blocks",
    "validate_view",
]

# Every scope the emulator knows, for tests of methods the bot itself does not call.
ALL_SCOPES = frozenset(
    {
        "chat:write",
        "chat:write.public",
        "commands",
        "app_mentions:read",
        "usergroups:read",
        "users:read",
        "reactions:write",
        "files:write",
        "im:write",
        "channels:join",
        *(f"{kind}:{what}" for kind in ("channels", "groups", "im", "mpim") for what in ("history", "read")),
    }
)
VIEW_MAX_BYTES = 250_000  # Slack refuses views over 250 kB
TRIGGER_TTL = 3.0  # seconds a trigger_id lives
RESPONSE_URL_USES, RESPONSE_URL_TTL = 5, 30 * 60.0  # a response_url: 5 uses within 30 minutes
_BUILDER_TRIGGER = re.compile(r"\d+\.(\d{13})\.trigger")  # slack_payloads: "<seq>.<epoch ms>.trigger"

# Slack's documented tiers (docs.slack.dev/apis/web-api/rate-limits), per method per workspace.
# 5 stands for the "special" methods with generous limits.
METHOD_TIERS = {
    "auth.test": 5,
    "apps.connections.open": 1,
    "chat.update": 3,
    "chat.delete": 3,
    "chat.postEphemeral": 4,
    "chat.getPermalink": 5,
    "views.open": 4,
    "views.update": 4,
    "views.publish": 4,
    "views.push": 4,
    "usergroups.users.list": 2,
    "users.info": 4,
    "conversations.info": 3,
    "conversations.replies": 3,
    "conversations.history": 3,
    "conversations.members": 4,
    "conversations.join": 3,
    "reactions.add": 3,
}
_JSON_FIELDS = ("blocks", "view", "metadata", "attachments")


@dataclass(frozen=True, slots=True)
class Call:
    """One request the emulator received."""

    method: str
    params: dict[str, Any]
    at: float
    status: int
    error: str | None = None


@dataclass(slots=True)
class Fault:
    """A scripted failure for the next `times` calls of a method."""

    error: str | None = "ratelimited"  # None with `commit`: answer normally, after `delay`
    status: int = 429
    retry_after: float | None = 1
    times: int = 1
    commit: bool = False  # handle the call first, then fail: "the request reached Slack, the answer was lost"
    delay: float = 0.0  # seconds to hold the answer (to trip client timeouts)
    drop: bool = False  # close the connection instead of answering (with `commit`: after the effect)


@dataclass(slots=True)
class Limits:
    """Rate limits; tests may tighten `window` to keep per-minute budgets fast."""

    window: float = 60.0  # the "per minute" of the tiers
    tiers: dict[int, int] = field(default_factory=lambda: {1: 5, 2: 20, 3: 50, 4: 100, 5: 1000})
    post_interval: float = 1.0  # chat.postMessage: ~1 per second per channel...
    post_burst: int = 3  # ...with short bursts allowed
    post_per_window: int = 300  # workspace-wide chat.postMessage cap (undocumented; generous)
    retry_after: int = 1


@dataclass(slots=True)
class ResponseHook:
    """One `response_url`: the message it belongs to (if any) and when it was used."""

    created: float
    channel: str | None = None
    message_ts: str | None = None
    user: str | None = None
    uses: list[float] = field(default_factory=list)


class _RateLimiter:
    """Sliding windows per method, a token bucket per channel for chat.postMessage."""

    def __init__(self, limits: Limits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self._clock = clock
        self._windows: dict[str, deque[float]] = defaultdict(deque)
        self._buckets: dict[str, tuple[float, float]] = {}

    def _window_ok(self, key: str, limit: int, now: float) -> bool:
        calls = self._windows[key]
        while calls and calls[0] <= now - self.limits.window:
            calls.popleft()
        return len(calls) < limit

    def check(self, method: str, channel: str | None) -> str | None:
        """Count the call if allowed; otherwise say which limit it breaks."""
        now = self._clock()
        if method == "chat.postMessage":
            if not self._window_ok(method, self.limits.post_per_window, now):
                return f"chat.postMessage workspace cap {self.limits.post_per_window}/window"
            burst = float(self.limits.post_burst)
            tokens, last = self._buckets.get(channel or "", (burst, now))
            tokens = min(burst, tokens + (now - last) / self.limits.post_interval)
            if tokens < 1.0:
                return f"chat.postMessage > 1 per {self.limits.post_interval}s in {channel} (burst {burst:g})"
            self._buckets[channel or ""] = (tokens - 1.0, now)
        else:
            limit = self.limits.tiers[METHOD_TIERS.get(method, 3)]
            if not self._window_ok(method, limit, now):
                return f"{method} > {limit} per {self.limits.window:g}s (tier {METHOD_TIERS.get(method, 3)})"
        self._windows[method].append(now)
        return None


class SlackEmulator(MethodsMixin):
    """The emulator: `async with SlackEmulator() as slack: AsyncWebClient(base_url=slack.api_url)`."""

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-test",  # noqa: S107 - the emulator's own placeholder, not a secret
        app_token: str = "xapp-test",  # noqa: S107 - likewise
        limits: Limits | None = None,
        allowed_mentions: set[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        scopes: frozenset[str] | set[str] | None = None,
        trigger_ttl: float = TRIGGER_TTL,
        default_member: bool = True,
    ) -> None:
        self.bot_token, self.app_token = bot_token, app_token
        # Scopes per token: the bot token gets the manifest's unless a test says otherwise.
        self.token_scopes: dict[str, frozenset[str]] = {
            bot_token: frozenset(scopes) if scopes is not None else manifest_scopes()
        }
        self.trigger_ttl = trigger_ttl
        self.default_member = default_member
        self._triggers: dict[str, float] = {}
        self._used_triggers: set[str] = set()
        self.hooks: dict[str, ResponseHook] = {}
        self.socket_deliveries: list[int] = []  # which connection (by number) got each envelope
        self.limits = limits or Limits()
        self.allowed_mentions: set[str] = allowed_mentions if allowed_mentions is not None else set()
        self.clock = clock
        self.calls: list[Call] = []
        self.violations: list[str] = []
        self.faults: dict[str, deque[Fault]] = defaultdict(deque)
        self._outage: tuple[float, Fault, frozenset[str] | None] | None = None  # until, answer, methods
        self.team_id, self.bot_user_id, self.bot_id, self.app_id = "T0001", "U0BOT", "B0001", "A0001"
        self.usergroups: dict[str, list[str]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.channels: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.ephemerals: list[dict[str, Any]] = []
        self.views: dict[str, dict[str, Any]] = {}
        self.home_views: dict[str, dict[str, Any]] = {}
        self.responses: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.view_triggers: dict[str, str] = {}  # view id -> the trigger_id that opened it
        self.revision = 0  # bumped on every change, for live views of the workspace
        self.on_violation: Callable[[str], None] | None = None  # the playground logs each one at once
        self.closing = False
        self._limiter = _RateLimiter(self.limits, clock)
        self._last_ts = 0.0
        self._changed = asyncio.Condition()
        self._sockets: list[web.WebSocketResponse] = []
        self._socket_ids: dict[int, int] = {}
        self._socket_seq = 0
        self._round_robin = 0
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self, *, port: int = 0, routes: Callable[[web.Application], None] | None = None) -> None:
        """Listen on loopback (a free port by default); `routes` adds more (the playground's page)."""
        app = web.Application()
        app.router.add_get("/socket", self._socket)
        app.router.add_post("/response/{key}", self._response_url)
        app.router.add_route("*", "/api/{method}", self._handle)
        if routes is not None:
            routes(app)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        try:
            await site.start()
        except OSError:
            await self._runner.cleanup()
            self._runner = None
            raise
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Close sockets and live streams, then stop listening."""
        self.closing = True
        await self._notify()
        for ws in list(self._sockets):
            await ws.close()
        for fut in self._acks.values():
            fut.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SlackEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    @property
    def socket_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/socket"

    def response_url(
        self,
        key: str = "1",
        *,
        channel: str | None = None,
        message_ts: str | None = None,
        user: str | None = None,
    ) -> str:
        """A `response_url` for payload builders; what the app posts there lands in `responses[key]`.

        With `channel`/`message_ts` it belongs to that message (`replace_original` edits it,
        `delete_original` deletes it); ephemeral replies go to `ephemerals` for `user`.
        """
        hook = self.hooks.setdefault(key, ResponseHook(created=self.clock()))
        hook.channel, hook.message_ts = channel or hook.channel, message_ts or hook.message_ts
        hook.user = user or hook.user
        return f"http://127.0.0.1:{self.port}/response/{key}"

    def issue_trigger(self) -> str:
        """A fresh `trigger_id`, as if Slack had just sent an interaction payload carrying it."""
        trigger = f"{len(self._triggers) + 1}.{int(time.time())}.emu{uuid.uuid4().hex[:10]}"
        self._triggers[trigger] = self.clock()
        return trigger

    def answer_late(self, method: str, delay: float, *, times: int = 1) -> None:
        """Perform the next `times` calls of `method` but answer only after `delay` seconds."""
        self.inject(
            method, Fault(error=None, status=200, retry_after=None, times=times, commit=True, delay=delay)
        )

    # -- test helpers ----------------------------------------------------------------------------

    def fail_for(
        self,
        seconds: float,
        *,
        status: int = 503,
        error: str = "service_unavailable",
        retry_after: float | None = None,
        methods: Iterable[str] | None = None,
    ) -> None:
        """An outage: every Web API call (or those of `methods`) answers `status` for `seconds`.

        Nothing takes effect meanwhile, as when Slack's edge refuses the request; `Retry-After`
        goes with the answer when given (Slack sends it with 503s as with 429s).
        """
        fault = Fault(error=error, status=status, retry_after=retry_after, times=1)
        self._outage = (self.clock() + seconds, fault, None if methods is None else frozenset(methods))

    def end_outage(self) -> None:
        """Slack answers again from now on."""
        self._outage = None

    def inject(self, method: str, fault: Fault | None = None, **kwargs: Any) -> None:
        """Fail the next call(s) of `method` as described (default: one 429 with Retry-After 1)."""
        self.faults[method].append(fault or Fault(**kwargs))

    def calls_to(self, method: str, *, ok: bool | None = None) -> list[Call]:
        return [c for c in self.calls if c.method == method and (ok is None or (c.error is None) == ok)]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Return once `predicate()` holds; re-checked after every call and socket ack."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(predicate)

    def assert_clean(self) -> None:
        assert not self.violations, "Slack emulator violations:\n" + "\n".join(self.violations)

    def thread(self, channel: str, root_ts: str) -> list[dict[str, Any]]:
        """The root message and its replies, oldest first."""
        msgs = self.messages.get(channel, {})
        return [m for ts, m in sorted(msgs.items()) if ts == root_ts or m.get("thread_ts") == root_ts]

    def violate(self, problem: str) -> None:
        self.violations.append(problem)
        if self.on_violation is not None:
            self.on_violation(problem)

    async def changed(self) -> None:
        """Wake whoever waits on the workspace (`wait_for`) after a change made outside the Web API."""
        await self._notify()

    async def _notify(self) -> None:
        self.revision += 1
        async with self._changed:
            self._changed.notify_all()

    def next_ts(self) -> str:
        """Wall-clock seconds, unique and increasing across channels, like Slack's message ids."""
        self._last_ts = max(round(time.time(), 6), round(self._last_ts + 1e-6, 6))
        return f"{self._last_ts:.6f}"

    # -- HTTP ------------------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        raw = await request.text()
        if raw:
            if request.content_type == "application/json":
                params.update(json.loads(raw))
            else:
                params.update(parse_qsl(raw, keep_blank_values=True))
        for key in _JSON_FIELDS:
            if isinstance(params.get(key), str) and params[key][:1] in "[{":
                params[key] = json.loads(params[key])
        return params

    def _token_error(self, method: str, request: web.Request, params: dict[str, Any]) -> str | None:
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else params.get("token")
        if not token:
            return "not_authed"
        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        return None if token == expected else "invalid_auth"

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        arrived = self.clock()
        status, body, headers = await self._dispatch(method, request, params)
        error = None if body.get("ok") else str(body.get("error"))
        self.calls.append(Call(method, params, arrived, status, error))
        await self._notify()
        return web.json_response(body, status=status, headers=headers)

    async def _dispatch(
        self, method: str, request: web.Request, params: dict[str, Any]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if error := self._token_error(method, request, params):
            self.violate(f"{method}: {error} (token)")
            return 200, {"ok": False, "error": error}, {}
        if self._outage is not None:
            until, outage, methods = self._outage
            if self.clock() >= until:
                self._outage = None
            elif methods is None or method in methods:
                return self._fault_response(outage)
        fault = self._take_fault(method)
        if fault is not None and not fault.commit:
            await asyncio.sleep(fault.delay)  # emulating a slow server, not waiting for a condition
            if fault.drop and request.transport is not None:
                request.transport.close()
            return self._fault_response(fault)
        if (broken := self._limiter.check(method, params.get("channel"))) is not None:
            self.violate(f"rate limit: {broken}")
            retry = str(self.limits.retry_after)
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": retry}
        if (refused := self._refusal(method, request, params)) is not None:
            return 200, refused, {}
        self._check_payload(method, params)
        if too_large := self._view_too_large(method, params):
            return 200, {"ok": False, "error": too_large}, {}
        if self._payload_invalid(method, params):
            return 200, {"ok": False, "error": "invalid_blocks"}, {}
        handler = self.method_handlers().get(method)
        body = handler(params) if handler else {"ok": False, "error": "unknown_method"}
        if fault is not None:
            await asyncio.sleep(fault.delay)  # the call took effect; its answer is late or lost
            if fault.drop and request.transport is not None:
                request.transport.close()
            return self._fault_response(fault) if fault.error else (200, body, {})
        return 200, body, {}

    def _scopes_of(self, request: web.Request, params: dict[str, Any]) -> frozenset[str]:
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else params.get("token")
        return self.token_scopes.get(str(token), frozenset())

    def _refusal(self, method: str, request: web.Request, params: dict[str, Any]) -> dict[str, Any] | None:
        """Scope, membership and trigger checks: Slack's error body, or None when the call may go."""
        if method == "apps.connections.open":
            return None
        scopes = self._scopes_of(request, params)
        channel = str(params.get("channel", ""))
        need = needed_scopes(method, channel_kind(self.channels.get(channel), channel))
        if need and not need & scopes:
            self.violate(f"{method}: missing_scope (needs {' or '.join(sorted(need))})")
            return {
                "ok": False,
                "error": "missing_scope",
                "needed": ",".join(sorted(need)),
                "provided": ",".join(sorted(scopes)),
            }
        if error := self.membership_error(method, params, scopes):
            return {"ok": False, "error": error}
        if method in ("views.open", "views.push") and (error := self._trigger_error(params)):
            return {"ok": False, "error": error}
        return None

    def _trigger_error(self, params: dict[str, Any]) -> str | None:
        """Slack's answer to a stale, reused or unknown `trigger_id` (None: valid, now used)."""
        trigger = str(params.get("trigger_id") or "")
        if not trigger:
            return None if params.get("interactivity_pointer") else "invalid_trigger_id"
        issued = self._triggers.get(trigger)
        if issued is None and (m := _BUILDER_TRIGGER.fullmatch(trigger)):
            issued = self.clock() - (time.time() - int(m.group(1)) / 1000)  # wall clock → our clock
        if issued is None:
            return "invalid_trigger_id"
        if trigger in self._used_triggers:
            return "exchanged_trigger_id"
        if self.clock() - issued > self.trigger_ttl:
            return "expired_trigger_id"
        self._used_triggers.add(trigger)
        return None

    def _view_too_large(self, method: str, params: dict[str, Any]) -> str | None:
        view = params.get("view")
        if not method.startswith("views.") or view is None:
            return None
        size = len(json.dumps(view, ensure_ascii=False).encode())
        if size <= VIEW_MAX_BYTES:
            return None
        self.violate(f"{method}: view_too_large ({size} bytes > {VIEW_MAX_BYTES})")
        return "view_too_large"

    def _take_fault(self, method: str) -> Fault | None:
        queue = self.faults.get(method)
        if not queue:
            return None
        fault = queue[0]
        fault.times -= 1
        if fault.times <= 0:
            queue.popleft()
        return fault

    @staticmethod
    def _fault_response(fault: Fault) -> tuple[int, dict[str, Any], dict[str, str]]:
        headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
        return fault.status, {"ok": False, "error": fault.error}, headers

    # -- payload checks --------------------------------------------------------------------------

    def _payload_invalid(self, method: str, params: dict[str, Any]) -> bool:
        problems: list[str] = []
        if "blocks" in params:
            problems += validate_blocks(params["blocks"])
        if "view" in params and method.startswith("views."):
            problems += validate_view(params["view"])
        for p in problems:
            self.violate(f"{method}: invalid_blocks: {p}")
        return bool(problems)

    def _check_payload(self, method: str, params: dict[str, Any]) -> None:
        if method in ("chat.postMessage", "chat.update", "chat.postEphemeral"):
            for p in validate_text(params.get("text")):
                self.violate(f"{method}: {p}")
        texts = [params["text"]] if isinstance(params.get("text"), str) else []
        texts += iter_texts(params.get("blocks")) if "blocks" in params else []
        texts += iter_texts(params.get("view")) if "view" in params else []
        for p in find_mentions(texts, self.allowed_mentions):
            self.violate(f"{method}: {p}")

    async def _response_url(self, request: web.Request) -> web.Response:
        """Slack's `response_url` webhook: 5 uses within 30 minutes; edits, deletes or adds a message."""
        params = await self._params(request)
        key, now = request.match_info["key"], self.clock()
        hook = self.hooks.setdefault(key, ResponseHook(created=now))
        if now - hook.created > RESPONSE_URL_TTL:
            return await self._hook_refused(params, now, "expired_url")
        if len(hook.uses) >= RESPONSE_URL_USES:
            return await self._hook_refused(params, now, "used_url")
        hook.uses.append(now)
        if not _truthy(params.get("delete_original")):
            self._check_payload("response_url", params)
            if self._payload_invalid("response_url", params):
                return await self._hook_refused(params, now, "invalid_blocks", status=400)
        self.responses[key].append(params)
        self._apply_response(hook, params)
        self.calls.append(Call("response_url", params, now, 200))
        await self._notify()
        return web.Response(text="ok")

    async def _hook_refused(
        self, params: dict[str, Any], now: float, error: str, *, status: int = 404
    ) -> web.Response:
        self.calls.append(Call("response_url", params, now, status, error))
        await self._notify()
        return web.Response(status=status, text=error)

    def _apply_response(self, hook: ResponseHook, params: dict[str, Any]) -> None:
        """What a `response_url` post does to the conversation."""
        original = self.messages.get(hook.channel or "", {}).get(hook.message_ts or "")
        if _truthy(params.get("delete_original")):
            if original is not None:
                self.messages[str(hook.channel)].pop(str(hook.message_ts))
            return
        if _truthy(params.get("replace_original")) and original is not None:
            original["text"] = params.get("text", original["text"])
            original["blocks"] = params.get("blocks", [])
            return
        if params.get("response_type") == "in_channel" and hook.channel:
            ts = self.next_ts()
            msg = {
                "type": "message",
                "user": self.bot_user_id,
                "bot_id": self.bot_id,
                "ts": ts,
                "text": params.get("text", ""),
                "blocks": params.get("blocks", []),
            }
            if params.get("thread_ts"):
                msg["thread_ts"] = str(params["thread_ts"])
            self.messages[hook.channel][ts] = msg
            return
        self.ephemerals.append(
            {
                **params,
                "channel": hook.channel,
                "user": hook.user,
                "via": "response_url",
                "in_reply_to": hook.message_ts,  # the message clicked (Slack shows the reply beside it)
            }
        )

    # -- Socket Mode -----------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        self._socket_seq += 1
        self._socket_ids[id(ws)] = self._socket_seq
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "connection_info": {"app_id": self.app_id},
        }
        await ws.send_json(hello)
        await self._notify()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self._on_ack(json.loads(msg.data))
                    await self._notify()
        finally:
            self._sockets.remove(ws)
            self._socket_ids.pop(id(ws), None)
        return ws

    def _on_ack(self, data: dict[str, Any]) -> None:
        fut = self._acks.pop(str(data.get("envelope_id")), None)
        if fut is None:
            self.violate(f"socket: ack for unknown envelope {data.get('envelope_id')!r}")
        elif not fut.done():
            fut.set_result(data.get("payload") or {})

    async def socket_disconnect(self, reason: str = "refresh_requested", *, index: int = -1) -> None:
        """Ask a connected client (the newest by default) to reconnect, as Slack does every few hours."""
        if self._sockets:
            await self._sockets[index].send_json({"type": "disconnect", "reason": reason})

    @property
    def socket_connected(self) -> bool:
        return bool(self._sockets)

    @property
    def socket_connections(self) -> int:
        """How many Socket Mode connections are open."""
        return len(self._sockets)

    async def socket_send(
        self,
        type_: str,
        payload: dict[str, Any],
        *,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """Deliver an envelope to one connected client (round robin) and return its ack payload.

        `socket_deliveries` records which connection (numbered from 1 in connect order) got it.
        """
        await self.wait_for(lambda: self.socket_connected, timeout)
        envelope_id = str(uuid.uuid4())
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = fut
        envelope = {
            "envelope_id": envelope_id,
            "type": type_,
            "payload": payload,
            "accepts_response_payload": type_ in ("slash_commands", "interactive"),
        }
        ws = self._sockets[self._round_robin % len(self._sockets)]
        self._round_robin += 1
        self.socket_deliveries.append(self._socket_ids.get(id(ws), 0))
        await ws.send_json(envelope)
        async with asyncio.timeout(timeout):
            return await fut


def _truthy(value: Any) -> bool:
    return value in (True, 1, "1", "true", "True")
