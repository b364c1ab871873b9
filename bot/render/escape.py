"""Make untrusted text (users, models, tools) safe to show in Slack.

Slack parses `&`, `<` and `>` as control characters in mrkdwn and in top-level `text`
(docs.slack.dev/messaging/formatting-message-text#escaping); escaping them defuses `<!channel>`,
`<!here>`, `<!subteam^…>`, `<@U…>` and deceptive `<url|label>` links. A bare `@here` still pings
when a message is sent with `link_names`/`parse=full`, so we break it with a word joiner as
defence in depth. Mentions the bot means (approvers, the requester) are built from validated ids.
"""

from __future__ import annotations

import re

from bot.render.redact import redact

_BARE_MENTION = re.compile(r"@(here|channel|everyone)\b", re.IGNORECASE)
_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")
_GROUP_ID = re.compile(r"S[A-Z0-9]{2,}")  # user groups ("subteams")
_WORD_JOINER = "\u2060"
# Bidirectional embeddings, overrides and isolates: "exe.txt" written as "txt.exe" with U+202E reads
# as something it is not (Trojan Source, CVE-2021-42574). Untrusted text never keeps them.
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
ELLIPSIS = "…"
# Whatever `escape` changes starts with one of these: text without any is returned as it is, one
# search instead of five passes (a 64 KB answer of emphasis is 40,000 pieces of text).
_TOUCHED = re.compile("[&<>@\u202a-\u202e\u2066-\u2069]")


def escape(text: str) -> str:
    """Escape Slack's control characters (ampersand first), neutralise @here/@channel, drop bidi controls."""
    if not _TOUCHED.search(text):
        return text
    if _BIDI_CONTROLS.search(text):
        text = _BIDI_CONTROLS.sub("", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BARE_MENTION.sub(lambda m: "@" + _WORD_JOINER + m.group(1), text) if "@" in text else text


def truncate(text: str, limit: int) -> str:
    """Cut escaped text to `limit` characters with an ellipsis, never inside an `&…;` entity."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + ELLIPSIS


def safe(text: str, limit: int | None = None) -> str:
    """Redact secrets, escape, then truncate: the one call for any untrusted text in mrkdwn."""
    escaped = escape(redact(text))
    return escaped if limit is None else truncate(escaped, limit)


def plain(text: str, limit: int) -> str:
    """Untrusted text for `plain_text` objects (headers, titles, labels), which are not mrkdwn.

    Whether Slack decodes entities in plain_text is unverified, so angle brackets become
    look-alike guillemets instead of entities; nothing in plain_text can mention anyone.
    """
    text = _BIDI_CONTROLS.sub("", redact(text)).replace("<", "‹").replace(">", "›")
    text = _BARE_MENTION.sub(lambda m: "@" + _WORD_JOINER + m.group(1), text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def code(text: str, limit: int | None = None) -> str:
    """Untrusted text as inline code: escaped, backticks replaced so it cannot close the span."""
    body = safe(text.replace("`", "ˋ").replace("\n", " "), limit)
    return f"`{body}`" if body else "` `"


def code_block(text: str, limit: int | None = None) -> str:
    """Untrusted text as a fenced code block that it cannot break out of."""
    body = safe(text.replace("```", "`\u200b`\u200b`"), limit)
    return f"```\n{body}\n```"


def is_user_id(value: str) -> bool:
    return bool(_USER_ID.fullmatch(value))


def is_group_id(value: str) -> bool:
    return bool(_GROUP_ID.fullmatch(value))


def group_mention(group_id: str) -> str:
    """`<!subteam^S…>` for a validated user-group id (rings its members); anything else escaped."""
    return f"<!subteam^{group_id}>" if is_group_id(group_id) else escape(group_id)


def user_mention(user_id: str) -> str:
    """`<@U…>` for a validated Slack user id; anything else is shown escaped, never as a mention."""
    return f"<@{user_id}>" if is_user_id(user_id) else escape(user_id)
