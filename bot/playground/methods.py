"""Web API method handlers of the Slack emulator: state changes and Slack's response shapes.

Shapes follow docs.slack.dev/reference/methods/* (see reference/slack.md section 2.5). Each handler
takes the merged request parameters and returns the JSON body; errors are Slack's error codes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

Body = dict[str, Any]
_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")
_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,}")
MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "slack-manifest.yml"

# Bot-token scopes each method needs (docs.slack.dev/reference/methods/*). A set means "one of";
# "history"/"read" pick the scope from the channel's kind (see `conversation_scope`).
METHOD_SCOPES: dict[str, frozenset[str] | str] = {
    "chat.postMessage": frozenset({"chat:write"}),
    "chat.update": frozenset({"chat:write"}),
    "chat.delete": frozenset({"chat:write"}),
    "chat.postEphemeral": frozenset({"chat:write"}),
    "usergroups.users.list": frozenset({"usergroups:read"}),
    "users.info": frozenset({"users:read"}),
    "reactions.add": frozenset({"reactions:write"}),
    "files.getUploadURLExternal": frozenset({"files:write"}),
    "files.completeUploadExternal": frozenset({"files:write"}),
    "conversations.history": "history",
    "conversations.replies": "history",
    "conversations.info": "read",
    "conversations.members": "read",
    "conversations.join": frozenset({"channels:join"}),
    "conversations.open": frozenset({"im:write"}),
}


def manifest_scopes(path: Path = MANIFEST) -> frozenset[str]:
    """The bot scopes `deploy/slack-manifest.yml` requests (what an installed app's token has)."""
    manifest = yaml.safe_load(path.read_text())
    return frozenset(str(s) for s in manifest["oauth_config"]["scopes"]["bot"])


def channel_kind(info: Body | None, channel: str) -> str:
    """ "channels" (public), "groups" (private), "im" or "mpim", Slack's scope prefixes."""
    if info is not None:
        if info.get("is_im"):
            return "im"
        if info.get("is_mpim"):
            return "mpim"
        if info.get("is_private"):
            return "groups"
        return "channels"
    return {"G": "groups", "D": "im"}.get(channel[:1], "channels")


def needed_scopes(method: str, kind: str) -> frozenset[str]:
    """Scopes (any one) `method` needs on a channel of `kind`; empty when it needs none."""
    need = METHOD_SCOPES.get(method, frozenset())
    if isinstance(need, str):
        return frozenset({f"{kind}:{need}"})
    return need


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
    default_member: bool
    ephemerals: list[dict[str, Any]]
    views: dict[str, dict[str, Any]]
    home_views: dict[str, dict[str, Any]]
    view_triggers: dict[str, str]

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
            "conversations.members": self._members,
            "conversations.join": self._join,
            "conversations.open": self._open_dm,
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

    # -- channels and membership -----------------------------------------------------------------

    def add_channel(
        self,
        channel: str,
        *,
        private: bool = False,
        im: bool = False,
        mpim: bool = False,
        bot_member: bool = True,
        members: tuple[str, ...] | list[str] | set[str] = (),
    ) -> Body:
        """Declare a conversation: its kind, whether the bot is in it, and (optionally) who is."""
        info: Body = {
            "id": channel,
            "name": channel.lower(),
            "is_channel": not (private or im or mpim),
            "is_group": private and not mpim,
            "is_im": im,
            "is_mpim": mpim,
            "is_private": private or im or mpim,
            "is_member": bot_member,
            "members": sorted(members),
        }
        self.channels[channel] = info
        return info

    def bot_is_member(self, channel: str) -> bool:
        """Whether the bot is in `channel` (undeclared channels: `default_member`)."""
        info = self.channels.get(channel)
        return self.default_member if info is None else bool(info.get("is_member"))

    def membership_error(self, method: str, p: Body, scopes: frozenset[str]) -> str | None:
        """Slack's answer when the bot is not in the conversation a method needs it in."""
        channel = str(p.get("channel", ""))
        if method not in _NEEDS_MEMBERSHIP or not channel or _USER_ID.fullmatch(channel):
            return None
        info = self.channels.get(channel)
        members = info.get("members") if info is not None else None
        if method == "chat.postEphemeral" and members and str(p.get("user", "")) not in members:
            return "user_not_in_channel"
        if self.bot_is_member(channel):
            return None
        kind = channel_kind(info, channel)
        if kind != "channels":
            return "channel_not_found"  # private conversations the bot is not in do not exist for it
        if method == "chat.postMessage" and "chat:write.public" in scopes:
            return None
        return "not_in_channel"

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
        if p.get("trigger_id"):
            self.view_triggers[view_id] = str(p["trigger_id"])
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

    def _open_dm(self, p: Body) -> Body:
        """A DM with one user: the same `D…` id each time, an im the bot is a member of."""
        user = str(p.get("users", ""))
        if not _USER_ID.fullmatch(user):
            return {"ok": False, "error": "user_not_found"}
        dm = f"D{user[1:]}"
        if dm not in self.channels:
            self.add_channel(dm, im=True, members={user})
        return {"ok": True, "channel": {"id": dm}}

    def _join(self, p: Body) -> Body:
        """The bot joins a public channel (private ones and DMs cannot be joined)."""
        channel = str(p.get("channel", ""))
        if not _CHANNEL_ID.fullmatch(channel):
            return {"ok": False, "error": "channel_not_found"}
        info = self.channels.get(channel) or self.add_channel(channel)
        if channel_kind(info, channel) != "channels":
            return {"ok": False, "error": "method_not_supported_for_channel_type"}
        info["is_member"] = True
        return {"ok": True, "channel": info}

    def _members(self, p: Body) -> Body:
        channel = str(p.get("channel", ""))
        info = self.channels.get(channel)
        if info is None:
            return (
                {"ok": False, "error": "channel_not_found"}
                if not _CHANNEL_ID.fullmatch(channel)
                else {"ok": True, "members": [], "response_metadata": {"next_cursor": ""}}
            )
        if info.get("is_private") and not info.get("is_member"):
            return {"ok": False, "error": "channel_not_found"}
        members = list(info.get("members", []))
        return {"ok": True, "members": members, "response_metadata": {"next_cursor": ""}}

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


_NEEDS_MEMBERSHIP = frozenset(
    {
        "chat.postMessage",
        "chat.postEphemeral",
        "conversations.history",
        "conversations.replies",
        "reactions.add",
    }
)


def _public(msg: Body, with_metadata: bool) -> Body:
    """A stored message as Slack returns it; metadata only when asked for (`include_all_metadata`)."""
    out = {k: v for k, v in msg.items() if k != "metadata"}
    if with_metadata and "metadata" in msg:
        out["metadata"] = msg["metadata"]
    return out
