"""Web API method handlers of the Slack emulator: state changes and Slack's response shapes.

Shapes follow docs.slack.dev/reference/methods/* (see reference/slack.md section 2.5). Each handler
takes the merged request parameters and returns the JSON body; errors are Slack's error codes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Body = dict[str, Any]
_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")
_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,}")


def _truthy(value: Any) -> bool:
    return value in (True, 1, "1", "true", "True")


class MethodsMixin:
    """Handlers mixed into `SlackEmulator`; state lives on the emulator instance."""

    team_id: str
    bot_user_id: str
    bot_id: str
    app_id: str
    usergroups: dict[str, list[str]]
    users: dict[str, dict[str, Any]]
    channels: dict[str, dict[str, Any]]
    messages: dict[str, dict[str, dict[str, Any]]]
    ephemerals: list[dict[str, Any]]
    views: dict[str, dict[str, Any]]
    home_views: dict[str, dict[str, Any]]

    @property
    def socket_url(self) -> str:
        raise NotImplementedError

    def next_ts(self) -> str:
        raise NotImplementedError

    def method_handlers(self) -> dict[str, Callable[[Body], Body]]:
        return {
            "auth.test": self._auth_test,
            "apps.connections.open": lambda p: {"ok": True, "url": self.socket_url},
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.delete": self._delete,
            "chat.getPermalink": self._permalink,
            "views.open": lambda p: self._store_view(p, "modal"),
            "views.push": lambda p: self._store_view(p, "modal"),
            "views.update": self._views_update,
            "views.publish": self._views_publish,
            "usergroups.users.list": self._usergroup_users,
            "users.info": self._users_info,
            "conversations.info": self._conversations_info,
            "conversations.replies": self._replies,
            "conversations.history": self._history,
            "reactions.add": self._reactions_add,
        }

    def _auth_test(self, p: Body) -> Body:
        return {
            "ok": True,
            "url": "https://emulated.slack.test/",
            "team": "Emulated",
            "user": "massgen",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _message(self, channel: str, ts: str) -> Body | None:
        return self.messages.get(channel, {}).get(ts)

    def _post_message(self, p: Body) -> Body:
        channel = str(p.get("channel", ""))
        if not _CHANNEL_ID.fullmatch(channel) and not _USER_ID.fullmatch(channel):
            return {"ok": False, "error": "channel_not_found"}
        thread_ts = p.get("thread_ts")
        if thread_ts and self._message(channel, str(thread_ts)) is None:
            return {"ok": False, "error": "thread_not_found"}
        ts = self.next_ts()
        msg: Body = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "text": p.get("text", ""),
            "blocks": p.get("blocks", []),
            "ts": ts,
            "team": self.team_id,
        }
        if thread_ts:
            msg["thread_ts"] = str(thread_ts)
        if p.get("metadata"):
            msg["metadata"] = p["metadata"]
        self.messages[channel][ts] = msg
        return {"ok": True, "channel": channel, "ts": ts, "message": _public(msg, with_metadata=False)}

    def _update(self, p: Body) -> Body:
        channel, ts = str(p.get("channel", "")), str(p.get("ts", ""))
        msg = self._message(channel, ts)
        if msg is None:
            return {"ok": False, "error": "message_not_found"}
        msg["text"] = p.get("text", msg["text"])
        if "blocks" in p:
            msg["blocks"] = p["blocks"]
        msg["edited"] = {"user": self.bot_user_id, "ts": self.next_ts()}
        return {
            "ok": True,
            "channel": channel,
            "ts": ts,
            "text": msg["text"],
            "message": {"text": msg["text"], "blocks": msg["blocks"]},
        }

    def _post_ephemeral(self, p: Body) -> Body:
        if not _USER_ID.fullmatch(str(p.get("user", ""))):
            return {"ok": False, "error": "user_not_found"}
        ts = self.next_ts()
        self.ephemerals.append({**p, "message_ts": ts})
        return {"ok": True, "message_ts": ts}

    def _delete(self, p: Body) -> Body:
        channel, ts = str(p.get("channel", "")), str(p.get("ts", ""))
        if self.messages.get(channel, {}).pop(ts, None) is None:
            return {"ok": False, "error": "message_not_found"}
        return {"ok": True, "channel": channel, "ts": ts}

    def _permalink(self, p: Body) -> Body:
        channel, ts = str(p.get("channel", "")), str(p.get("message_ts", ""))
        if self._message(channel, ts) is None:
            return {"ok": False, "error": "message_not_found"}
        link = f"https://emulated.slack.test/archives/{channel}/p{ts.replace('.', '')}"
        return {"ok": True, "channel": channel, "permalink": link}

    def _store_view(self, p: Body, expected: str) -> Body:
        view = p.get("view")
        if not isinstance(view, dict) or view.get("type") != expected:
            return {"ok": False, "error": "invalid_arguments"}
        if expected == "modal" and not p.get("trigger_id") and not p.get("interactivity_pointer"):
            return {"ok": False, "error": "invalid_trigger_id"}
        view_id = f"V{len(self.views) + 1:08d}"
        stored = {
            **view,
            "id": view_id,
            "team_id": self.team_id,
            "app_id": self.app_id,
            "hash": self.next_ts(),
        }
        self.views[view_id] = stored
        return {"ok": True, "view": stored}

    def _views_update(self, p: Body) -> Body:
        view_id = p.get("view_id")
        if not view_id and p.get("external_id"):
            view_id = next(
                (k for k, v in self.views.items() if v.get("external_id") == p["external_id"]), None
            )
        if view_id not in self.views:
            return {"ok": False, "error": "not_found"}
        if not isinstance(p.get("view"), dict):
            return {"ok": False, "error": "invalid_arguments"}
        self.views[view_id] = {**p["view"], "id": view_id, "team_id": self.team_id, "hash": self.next_ts()}
        return {"ok": True, "view": self.views[view_id]}

    def _views_publish(self, p: Body) -> Body:
        user = str(p.get("user_id", ""))
        view = p.get("view")
        if not _USER_ID.fullmatch(user):
            return {"ok": False, "error": "user_not_found"}
        if not isinstance(view, dict) or view.get("type") != "home":
            return {"ok": False, "error": "invalid_arguments"}
        self.home_views[user] = {**view, "id": f"VH{user}", "team_id": self.team_id}
        return {"ok": True, "view": self.home_views[user]}

    def _usergroup_users(self, p: Body) -> Body:
        group = str(p.get("usergroup", ""))
        if group not in self.usergroups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(self.usergroups[group])}

    def _users_info(self, p: Body) -> Body:
        user = str(p.get("user", ""))
        if user in self.users:
            return {"ok": True, "user": self.users[user]}
        if not _USER_ID.fullmatch(user):
            return {"ok": False, "error": "user_not_found"}
        name = user.lower()
        profile = {"display_name": name, "real_name": name}
        info = {"id": user, "team_id": self.team_id, "name": name, "real_name": name, "profile": profile}
        return {"ok": True, "user": {**info, "is_bot": False, "is_admin": False, "deleted": False}}

    def _conversations_info(self, p: Body) -> Body:
        channel = str(p.get("channel", ""))
        if channel in self.channels:
            return {"ok": True, "channel": self.channels[channel]}
        if not _CHANNEL_ID.fullmatch(channel):
            return {"ok": False, "error": "channel_not_found"}
        info = {
            "id": channel,
            "name": channel.lower(),
            "is_channel": channel[0] == "C",
            "is_im": channel[0] == "D",
        }
        return {"ok": True, "channel": {**info, "is_private": channel[0] == "G", "is_member": True}}

    def _replies(self, p: Body) -> Body:
        channel, ts = str(p.get("channel", "")), str(p.get("ts", ""))
        root = self._message(channel, ts)
        if root is None:
            return {"ok": False, "error": "thread_not_found"}
        root_ts = root.get("thread_ts", ts)
        with_md = _truthy(p.get("include_all_metadata"))
        msgs = self.messages[channel]
        thread = [m for t, m in sorted(msgs.items()) if t == root_ts or m.get("thread_ts") == root_ts]
        return {"ok": True, "messages": [_public(m, with_md) for m in thread], "has_more": False}

    def _history(self, p: Body) -> Body:
        channel = str(p.get("channel", ""))
        oldest = str(p.get("oldest", "0"))
        with_md = _truthy(p.get("include_all_metadata"))
        top = [
            m for t, m in sorted(self.messages.get(channel, {}).items(), reverse=True) if "thread_ts" not in m
        ]
        msgs = [_public(m, with_md) for m in top if float(m["ts"]) > float(oldest)]
        return {"ok": True, "messages": msgs, "has_more": False}

    def _reactions_add(self, p: Body) -> Body:
        msg = self._message(str(p.get("channel", "")), str(p.get("timestamp", "")))
        if msg is None:
            return {"ok": False, "error": "message_not_found"}
        reactions = msg.setdefault("reactions", [])
        name = str(p.get("name", ""))
        if name in reactions:
            return {"ok": False, "error": "already_reacted"}
        reactions.append(name)
        return {"ok": True}


def _public(msg: Body, with_metadata: bool) -> Body:
    """A stored message as Slack returns it; metadata only when asked for (`include_all_metadata`)."""
    out = {k: v for k, v in msg.items() if k != "metadata"}
    if with_metadata and "metadata" in msg:
        out["metadata"] = msg["metadata"]
    return out
