"""The playground's local workspace: its people and channel, and what Slack sends the bot when they act.

The emulator (`SlackEmulator`) is Slack's Web API side; this is Slack's client side. A message, a
`/massgen` command, a button click, a modal submission or opening the Home tab becomes the request
Slack would send: signed with the app's signing secret and POSTed to the bot's real HTTP endpoint.
What the bot answers in the HTTP response (a slash command's ack text, a modal's `response_action`)
is applied as Slack applies it.
"""

from __future__ import annotations

import html
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bot.playground.emulator import SlackEmulator
from bot.playground.payloads import (
    app_home_opened,
    app_mention,
    block_actions,
    encode_form,
    encode_interactive,
    encode_json,
    signed_request,
    slash_command,
    view_submission,
)

log = logging.getLogger(__name__)

# Slack gives an app 3 s to acknowledge a command, a click or a submission (docs.slack.dev/interactivity).
ACK_TIMEOUT = 3.0
COMMAND = "/massgen"
_MENTION = re.compile(r"(?<![\w<])@([a-z][a-z0-9._-]*)")


@dataclass(frozen=True, slots=True)
class Person:
    """Someone in the workspace; `role` is what the user switcher shows."""

    id: str
    name: str
    role: str


REQUESTER = Person("U0REQUESTER", "riley", "requester")
APPROVER = Person("U0APPROVER", "avery", "approver")
BYSTANDER = Person("U0BYSTANDER", "sam", "someone else")
PEOPLE = (REQUESTER, APPROVER, BYSTANDER)
CHANNEL, CHANNEL_NAME = "C0PLAYGROUND", "playground"
BOT_NAME = "massgen"


class PlaygroundError(ValueError):
    """A request from the page that the workspace refuses (unknown user, view or message)."""


@dataclass(slots=True)
class Workspace:
    """One local workspace: the emulator's state plus who has which modal open."""

    slack: SlackEmulator
    signing_secret: str
    bot_url: str = ""  # the bot's POST /slack/events, set once it listens
    people: tuple[Person, ...] = PEOPLE
    _session: aiohttp.ClientSession | None = None
    _trigger_users: dict[str, str] = field(default_factory=dict)
    _modals: dict[str, list[str]] = field(default_factory=dict)
    _seen_views: set[str] = field(default_factory=set)
    _ephemeral_ts: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        members = {p.id for p in self.people} | {self.slack.bot_user_id}
        self.slack.add_channel(CHANNEL, members=members)
        self.slack.channels[CHANNEL]["name"] = CHANNEL_NAME
        self.slack.allowed_mentions |= {p.id for p in self.people}
        self.slack.on_violation = _log_violation
        for person in self.people:
            profile = {"display_name": person.name, "real_name": person.name.title()}
            self.slack.users[person.id] = {
                "id": person.id,
                "team_id": self.slack.team_id,
                "name": person.name,
                "real_name": person.name.title(),
                "profile": profile,
                "is_bot": False,
                "is_admin": False,
                "deleted": False,
            }

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def person(self, user: str) -> Person:
        for person in self.people:
            if person.id == user:
                return person
        raise PlaygroundError(f"unknown user {user!r}")

    # -- what people do ----------------------------------------------------------------------------

    async def send(self, user: str, text: str, *, thread_ts: str | None = None) -> str | None:
        """The composer: `/massgen ...` is a slash command; anything else a message (a mention if it names
        the bot). Returns a problem to show the sender, or None."""
        self.person(user)
        text = text.strip()
        if not text:
            return None
        if text.startswith("/"):
            command, _, rest = text.partition(" ")
            if command != COMMAND:
                return f"{command} is not a valid command. In the playground, the app's command is {COMMAND}."
            return await self._command(user, rest.strip())
        return await self._message(user, text, thread_ts)

    async def _command(self, user: str, text: str) -> str | None:
        key = f"cmd-{len(self.slack.hooks) + 1}"
        hook = self.slack.response_url(key, channel=CHANNEL, user=user)
        trigger = self._trigger(user)
        fields = slash_command(
            text, user=user, channel=CHANNEL, team=self.slack.team_id, response_url=hook, trigger_id=trigger
        )
        fields["channel_name"], fields["user_name"] = CHANNEL_NAME, self.person(user).name
        status, body = await self._post(encode_form(fields))
        if status != 200:
            return f'{COMMAND} failed with the error "{body or "dispatch_failed"}"'
        await self._ack_reply(user, body, thread_ts=None)
        return None

    async def _message(self, user: str, text: str, thread_ts: str | None) -> str | None:
        if thread_ts is not None and thread_ts not in self.slack.messages.get(CHANNEL, {}):
            raise PlaygroundError("no such thread")
        encoded = self.encode_text(text)
        ts = self.slack.next_ts()
        msg: dict[str, Any] = {
            "type": "message",
            "user": user,
            "text": encoded,
            "ts": ts,
            "team": self.slack.team_id,
        }
        if thread_ts:
            msg["thread_ts"] = thread_ts
        self.slack.messages[CHANNEL][ts] = msg
        await self.slack.changed()
        if f"<@{self.slack.bot_user_id}>" not in encoded:
            return None  # the manifest subscribes to mentions only: other messages never reach the bot
        mention_text = encoded.replace(f"<@{self.slack.bot_user_id}>", "", 1).strip()
        event = app_mention(
            mention_text, user=user, channel=CHANNEL, ts=ts, thread_ts=thread_ts, team=self.slack.team_id
        )
        event["event"]["text"] = encoded
        status, body = await self._post(encode_json(event))
        return None if status == 200 else f"the app did not take the mention ({status}: {body[:200]})"

    def encode_text(self, text: str) -> str:
        """What Slack makes of typed text: `&`, `<`, `>` escaped; `@name` of a member becomes `<@U…>`."""
        escaped = html.escape(text, quote=False)
        names = {p.name: p.id for p in self.people} | {BOT_NAME: self.slack.bot_user_id}

        def mention(match: re.Match[str]) -> str:
            found = names.get(match.group(1).lower())
            return f"<@{found}>" if found else match.group(0)

        return _MENTION.sub(mention, escaped)

    async def click(
        self,
        user: str,
        *,
        action_id: str,
        block_id: str,
        value: str,
        message_ts: str | None = None,
        view_id: str | None = None,
    ) -> str | None:
        """A button click in a message (`message_ts`), a modal or the Home tab (`view_id`)."""
        self.person(user)
        trigger = self._trigger(user)
        if view_id is not None:
            view = self._view(user, view_id)
            payload = block_actions(
                action_id,
                value,
                user=user,
                block_id=block_id,
                view=view,
                team=self.slack.team_id,
                trigger_id=trigger,
            )
        else:
            message = self.slack.messages.get(CHANNEL, {}).get(message_ts or "")
            if message is None:
                raise PlaygroundError("no such message")
            key = f"click-{len(self.slack.hooks) + 1}"
            hook = self.slack.response_url(key, channel=CHANNEL, message_ts=message_ts, user=user)
            payload = block_actions(
                action_id,
                value,
                user=user,
                channel=CHANNEL,
                message_ts=str(message_ts),
                block_id=block_id,
                message=message,
                team=self.slack.team_id,
                response_url=hook,
                trigger_id=trigger,
            )
            if message.get("thread_ts"):
                payload["container"]["thread_ts"] = message["thread_ts"]
        payload["actions"][0]["text"]["text"] = _button_text(payload, action_id, block_id)
        status, _ = await self._post(encode_interactive(payload))
        return None if status == 200 else f"the app did not take the click ({status})"

    async def submit(
        self, user: str, view_id: str, values: dict[str, dict[str, Any]]
    ) -> dict[str, str] | None:
        """Submit the user's open modal; returns the field errors the app answered with, if any."""
        view = self._view(user, view_id)
        payload = view_submission(
            str(view.get("callback_id", "")),
            values,
            user=user,
            private_metadata=str(view.get("private_metadata", "")),
            view_id=view_id,
            team=self.slack.team_id,
        )
        payload["view"].update({k: view[k] for k in ("blocks", "title", "hash") if k in view})
        status, body = await self._post(encode_interactive(payload))
        if status != 200:
            return {"": f"the app did not take the submission ({status})"}
        answer = _json(body)
        action = answer.get("response_action")
        if action == "errors":
            return {str(k): str(v) for k, v in (answer.get("errors") or {}).items()}
        stack = self._modals.get(user, [])
        if action == "update" and isinstance(answer.get("view"), dict):
            self.slack.views[view_id] = {**answer["view"], "id": view_id, "team_id": self.slack.team_id}
        elif action == "clear":
            stack.clear()
        elif view_id in stack:
            stack.remove(view_id)
        await self.slack.changed()
        return None

    async def close_view(self, user: str, view_id: str) -> None:
        """The modal's Cancel / ×: gone; the app hears `view_closed` only if it asked (`notify_on_close`)."""
        view = self._view(user, view_id)
        self._modals[user].remove(view_id)
        await self.slack.changed()
        if view.get("notify_on_close"):
            payload = {
                "type": "view_closed",
                "team": {"id": self.slack.team_id, "domain": "playground"},
                "user": {"id": user, "name": self.person(user).name, "team_id": self.slack.team_id},
                "api_app_id": self.slack.app_id,
                "view": view,
                "is_cleared": False,
            }
            await self._post(encode_interactive(payload))

    async def open_home(self, user: str) -> None:
        """The user opens the app's Home tab: Slack sends `app_home_opened`."""
        self.person(user)
        await self._post(encode_json(app_home_opened(user, team=self.slack.team_id)))

    # -- what the page shows -------------------------------------------------------------------------

    def state(self, user: str) -> dict[str, Any]:
        """Everything the page renders for `user`: channel, threads, their ephemerals, modal, Home tab."""
        me = self.person(user)
        self._sync()
        messages = sorted(self.slack.messages.get(CHANNEL, {}).values(), key=lambda m: float(m["ts"]))
        roots = [self._shown(m) for m in messages if m.get("thread_ts", m["ts"]) == m["ts"]]
        by_root = {r["ts"]: r for r in roots}
        for m in messages:
            root = by_root.get(str(m.get("thread_ts", "")))
            if root is not None and m["ts"] != root["ts"]:
                root["replies"].append(self._shown(m))
        stack = self._modals.get(user, [])
        return {
            "revision": self.slack.revision,
            "me": _person(me),
            "people": [_person(p) for p in self.people],
            "bot": {"id": self.slack.bot_user_id, "name": BOT_NAME},
            "channel": {"id": CHANNEL, "name": CHANNEL_NAME},
            "messages": roots,
            "ephemerals": self._ephemerals_for(user),
            "modal": self.slack.views.get(stack[-1]) if stack else None,
            "home": self.slack.home_views.get(user),
        }

    def _shown(self, msg: dict[str, Any]) -> dict[str, Any]:
        author = self.slack.users.get(str(msg.get("user")), {}).get("name")
        name = BOT_NAME if msg.get("bot_id") or msg.get("user") == self.slack.bot_user_id else author
        keep = ("ts", "thread_ts", "text", "blocks", "user", "edited", "reactions")
        return {**{k: msg[k] for k in keep if k in msg}, "name": name or msg.get("user"), "replies": []}

    def _ephemerals_for(self, user: str) -> list[dict[str, Any]]:
        shown = []
        for index, eph in enumerate(self.slack.ephemerals):
            if eph.get("user") != user:
                continue
            ts = self._ephemeral_ts.setdefault(index, str(eph.get("message_ts") or self.slack.next_ts()))
            thread = eph.get("thread_ts") or self._thread_of(eph.get("in_reply_to"))
            shown.append(
                {"ts": ts, "thread_ts": thread, "text": eph.get("text", ""), "blocks": eph.get("blocks", [])}
            )
        return shown

    def _thread_of(self, ts: Any) -> str | None:
        """The thread a message is in (None for a message in the channel itself)."""
        msg = self.slack.messages.get(CHANNEL, {}).get(str(ts or ""))
        thread = msg.get("thread_ts") if msg is not None else None
        return str(thread) if thread and thread != msg.get("ts") else None  # type: ignore[union-attr]

    def _sync(self) -> None:
        """Modals the app opened go to the user whose action carried the trigger."""
        for view_id, trigger in self.slack.view_triggers.items():
            if view_id in self._seen_views:
                continue
            self._seen_views.add(view_id)
            if (owner := self._trigger_users.get(trigger)) is not None:
                self._modals.setdefault(owner, []).append(view_id)

    def _view(self, user: str, view_id: str) -> dict[str, Any]:
        self._sync()
        if view_id in self._modals.get(user, []):
            return self.slack.views[view_id]
        home = self.slack.home_views.get(user)
        if home is not None and home.get("id") == view_id:
            return home
        raise PlaygroundError("no such view open for this user")

    def _trigger(self, user: str) -> str:
        trigger = self.slack.issue_trigger()
        self._trigger_users[trigger] = user
        return trigger

    async def _post(self, body: bytes) -> tuple[int, str]:
        if not self.bot_url:
            return 503, "the bot is not listening yet"
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ACK_TIMEOUT))
        try:
            async with self._session.post(
                self.bot_url, data=body, headers=signed_request(body, self.signing_secret)
            ) as r:
                return r.status, await r.text()
        except TimeoutError:
            return 408, "operation_timeout"
        except aiohttp.ClientError as exc:
            return 502, f"dispatch_failed ({exc.__class__.__name__})"

    async def _ack_reply(self, user: str, body: str, *, thread_ts: str | None) -> None:
        """A slash command's ack with content: shown to the user (or the channel, `in_channel`)."""
        if not body.strip():
            return
        answer = _json(body) or {"text": body}
        if answer.get("response_type") == "in_channel":
            ts = self.slack.next_ts()
            self.slack.messages[CHANNEL][ts] = {
                "type": "message",
                "user": self.slack.bot_user_id,
                "bot_id": self.slack.bot_id,
                "ts": ts,
                "text": answer.get("text", ""),
                "blocks": answer.get("blocks", []),
            }
        else:
            self.slack.ephemerals.append(
                {**answer, "channel": CHANNEL, "user": user, "via": "ack", "thread_ts": thread_ts}
            )
        await self.slack.changed()


def _log_violation(problem: str) -> None:
    log.warning("playground: the bot did something Slack refuses: %s", problem)


def _person(p: Person) -> dict[str, str]:
    return {"id": p.id, "name": p.name, "role": p.role}


def _json(body: str) -> dict[str, Any]:
    try:
        value = json.loads(body) if body.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _button_text(payload: dict[str, Any], action_id: str, block_id: str) -> str:
    """The clicked button's label, as Slack reports it in the action."""
    blocks = (payload.get("message") or payload.get("view") or {}).get("blocks") or []
    for block in blocks:
        if block.get("block_id") not in (None, block_id):
            continue
        elements = block.get("elements") or [block.get("accessory") or {}]
        for element in elements:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return str((element.get("text") or {}).get("text", action_id))
    return action_id
