"""Builders for what Slack sends an app: slash commands, button clicks, modal submissions, events.

Each builder returns the payload as Bolt sees it (a dict); `encode_*` turns it into the HTTP body
Slack would POST (form for commands, `payload=` form for interactivity, JSON for events), and
`signed_request` adds the signature headers. For Socket Mode pass the dict to
`SlackEmulator.socket_send(type, payload)` with type `slash_commands`, `interactive` or `events_api`.
Shapes: reference/slack.md section 2.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any
from urllib.parse import quote, urlencode

from bot.playground.signing import sign

TEAM, APP, BOT_USER = "T0001", "A0001", "U0BOT"
_seq = itertools.count(1)


def _trigger_id() -> str:
    """A trigger id carrying its issue time (epoch ms), which the emulator's expiry check reads."""
    return f"{next(_seq)}.{time.time_ns() // 1_000_000}.trigger"


def slash_command(
    text: str,
    *,
    command: str = "/massgen",
    user: str = "U0USER",
    channel: str = "C0CHAN",
    team: str = TEAM,
    trigger_id: str | None = None,
    response_url: str | None = None,
) -> dict[str, str]:
    """Form fields of a slash command invocation."""
    return {
        "token": "legacy",
        "team_id": team,
        "team_domain": "emulated",
        "channel_id": channel,
        "channel_name": channel.lower(),
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "api_app_id": APP,
        "is_enterprise_install": "false",
        "response_url": response_url or f"https://hooks.slack.test/commands/{team}/{next(_seq)}/x",
        "trigger_id": trigger_id or _trigger_id(),
    }


def block_actions(
    action_id: str,
    value: str,
    *,
    user: str = "U0USER",
    channel: str = "C0CHAN",
    message_ts: str = "1700000000.000100",
    block_id: str = "b0",
    message: dict[str, Any] | None = None,
    view: dict[str, Any] | None = None,
    team: str = TEAM,
    response_url: str | None = None,
    trigger_id: str | None = None,
) -> dict[str, Any]:
    """A button click in a message (or in a modal when `view` is given)."""
    action = {
        "action_id": action_id,
        "block_id": block_id,
        "type": "button",
        "value": value,
        "text": {"type": "plain_text", "text": action_id, "emoji": True},
        "action_ts": f"{time.time():.6f}",
    }
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
        "api_app_id": APP,
        "token": "legacy",
        "trigger_id": trigger_id or _trigger_id(),
        "team": {"id": team, "domain": "emulated"},
        "enterprise": None,
        "is_enterprise_install": False,
        "state": {"values": {}},
        "response_url": response_url or f"https://hooks.slack.test/actions/{team}/{next(_seq)}/y",
        "actions": [action],
    }
    if view is not None:
        payload["container"] = {"type": "view", "view_id": view.get("id", "V0001")}
        payload["view"] = view
    else:
        msg = message or {
            "type": "message",
            "ts": message_ts,
            "user": BOT_USER,
            "text": "fallback",
            "blocks": [],
        }
        payload["container"] = {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
        }
        payload["channel"] = {"id": channel, "name": channel.lower()}
        payload["message"] = msg
    return payload


def view_submission(
    callback_id: str,
    values: dict[str, dict[str, Any]],
    *,
    user: str = "U0USER",
    private_metadata: str = "",
    view_id: str = "V0001",
    team: str = TEAM,
) -> dict[str, Any]:
    """A modal submission; `values` is `{block_id: {action_id: {"type": ..., "value": ...}}}`."""
    return {
        "type": "view_submission",
        "team": {"id": team, "domain": "emulated"},
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
        "api_app_id": APP,
        "token": "legacy",
        "trigger_id": _trigger_id(),
        "view": {
            "id": view_id,
            "team_id": team,
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": private_metadata,
            "blocks": [],
            "state": {"values": values},
            "hash": f"{time.time():.6f}",
            "title": {"type": "plain_text", "text": "Modal"},
            "app_id": APP,
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def _event_callback(event: dict[str, Any], team: str) -> dict[str, Any]:
    now = int(time.time())
    return {
        "token": "legacy",
        "team_id": team,
        "api_app_id": APP,
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{next(_seq):08d}",
        "event_time": now,
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": team,
                "user_id": BOT_USER,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"1-message-{team}-x",
    }


def app_mention(
    text: str,
    *,
    user: str = "U0USER",
    channel: str = "C0CHAN",
    ts: str | None = None,
    thread_ts: str | None = None,
    team: str = TEAM,
) -> dict[str, Any]:
    """An `event_callback` envelope for `<@bot> text`; Slack escapes &, <, > in `text` itself."""
    return message_event(
        f"<@{BOT_USER}> {text}",
        user=user,
        channel=channel,
        ts=ts,
        thread_ts=thread_ts,
        team=team,
        event_type="app_mention",
    )


def message_event(
    text: str,
    *,
    user: str = "U0USER",
    channel: str = "C0CHAN",
    ts: str | None = None,
    thread_ts: str | None = None,
    team: str = TEAM,
    event_type: str = "message",
) -> dict[str, Any]:
    """An `event_callback` envelope for a channel message (or an `app_mention`)."""
    ts = ts or f"{time.time():.6f}"
    event: dict[str, Any] = {
        "type": event_type,
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "team": team,
        "client_msg_id": f"cm-{next(_seq)}",
    }
    if event_type == "message":
        event["channel_type"] = "channel"
    if thread_ts:
        event["thread_ts"] = thread_ts
    return _event_callback(event, team)


def app_home_opened(user: str, *, team: str = TEAM) -> dict[str, Any]:
    """An `event_callback` envelope for a user opening the app's Home tab."""
    event = {
        "type": "app_home_opened",
        "user": user,
        "channel": f"D{user[1:]}",
        "tab": "home",
        "event_ts": f"{time.time():.6f}",
    }
    return _event_callback(event, team)


def url_verification(challenge: str = "challenge-token") -> dict[str, Any]:
    return {"token": "legacy", "challenge": challenge, "type": "url_verification"}


def encode_form(fields: dict[str, str]) -> bytes:
    """Body of a slash command POST."""
    return urlencode(fields).encode()


def encode_interactive(payload: dict[str, Any]) -> bytes:
    """Body of an interactivity POST: `payload=<url-encoded JSON>`."""
    return ("payload=" + quote(json.dumps(payload))).encode()


def encode_json(payload: dict[str, Any]) -> bytes:
    """Body of an Events API POST."""
    return json.dumps(payload).encode()


def signed_request(body: bytes, secret: str, *, timestamp: int | None = None) -> dict[str, str]:
    """Headers for POSTing `body` to `/slack/events`: content type plus signature."""
    content_type = "application/json" if body[:1] == b"{" else "application/x-www-form-urlencoded"
    return {"Content-Type": content_type, **sign(body, secret, timestamp)}
