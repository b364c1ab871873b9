"""The app manifest requests a scope for every Web API method the bot calls, and none it never uses."""

from __future__ import annotations

import re
from pathlib import Path

from bot.playground.emulator import manifest_scopes
from bot.playground.methods import METHOD_SCOPES, needed_scopes

BOT = Path(__file__).resolve().parents[3] / "bot"
_FAMILIES = "auth|apps|chat|conversations|files|reactions|usergroups|users|views"
# "chat.postMessage" as a string (outbox.call, the outbox's own sends) or `client.chat_postMessage(`.
_AS_STRING = re.compile(rf"\"((?:{_FAMILIES})\.[a-zA-Z.]+)\"")
_AS_SDK_CALL = re.compile(rf"\bclient\.((?:{_FAMILIES})_[a-zA-Z_]+)\(")
# Named in the outbox's rate tables without being called: not a use.
_TABLES = {"outbox_budget.py"}
# The playground's emulator answers Web API methods as Slack does; naming them is not calling them.
_SLACK_SIDE = "playground"
_CONVERSATION_KINDS = ("channels", "groups", "im", "mpim")


def methods_the_bot_calls() -> set[str]:
    """Every Web API method named in bot/ (string method names and SDK calls)."""
    found: set[str] = set()
    for path in BOT.rglob("*.py"):
        if path.name in _TABLES or _SLACK_SIDE in path.relative_to(BOT).parts:
            continue
        source = path.read_text()
        found |= set(_AS_STRING.findall(source))
        found |= {m.replace("_", ".", 1) for m in _AS_SDK_CALL.findall(source)}
    return found


def test_every_method_the_bot_calls_is_covered_by_the_manifest() -> None:
    scopes = manifest_scopes()
    methods = methods_the_bot_calls()
    assert {"chat.postMessage", "chat.update", "conversations.history", "conversations.replies"} <= methods
    missing: list[str] = []
    for method in sorted(methods):
        # History reads (the outbox's lookup) run in every kind of conversation the bot posts to;
        # info/members reads only in channels (is an approver a member?).
        need = METHOD_SCOPES.get(method)
        kinds: tuple[str, ...] = ("channels",)
        if isinstance(need, str):
            kinds = _CONVERSATION_KINDS if need == "history" else ("channels", "groups")
        for kind in kinds:
            need = needed_scopes(method, kind)
            if need and not need & scopes:
                missing.append(f"{method} in {kind}: needs {' or '.join(sorted(need))}")
    assert missing == []


def test_history_scopes_cover_the_outbox_lookup_and_unused_scopes_are_gone() -> None:
    scopes = manifest_scopes()
    assert {"channels:history", "groups:history", "im:history", "mpim:history"} <= scopes
    # users.info: only `/massgen settings` asks it (is the person changing them a workspace admin?).
    assert "users:read" in scopes
    assert "users.info" in methods_the_bot_calls()
