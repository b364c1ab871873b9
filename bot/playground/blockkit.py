"""Offline Block Kit and mention checks used by the Slack emulator and by rendering tests.

Slack's own limits (docs.slack.dev/reference/block-kit) plus the message-level rules that
`slack_sdk.models` does not check (block counts, header type, duplicate ids). Every function
returns a list of human-readable problems; an empty list means the payload is acceptable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

MAX_BLOCKS = {"message": 50, "modal": 100, "home": 100}
TEXT_HARD_LIMIT = 40_000
# Slack rejects messages around 12-13k characters of block text (bolt-js #2509, #2867).
MESSAGE_TEXT_LIMIT = 12_000
TEXT_SPLIT_LIMIT = 4_000  # Slack recommends ≤ 4,000; we split long text ourselves, so more is our bug

BLOCK_TYPES = frozenset(
    {
        "section",
        "actions",
        "context",
        "header",
        "divider",
        "image",
        "input",
        "rich_text",
        "markdown",
        "file",
        "video",
    }
)
INTERACTIVE = frozenset(
    {
        "button",
        "overflow",
        "datepicker",
        "timepicker",
        "datetimepicker",
        "checkboxes",
        "radio_buttons",
        "static_select",
        "external_select",
        "users_select",
        "conversations_select",
        "channels_select",
        "multi_static_select",
        "multi_external_select",
        "multi_users_select",
        "multi_conversations_select",
        "multi_channels_select",
    }
)
INPUT_ELEMENTS = INTERACTIVE - {"button", "overflow"} | {
    "plain_text_input",
    "email_text_input",
    "url_text_input",
    "number_input",
    "rich_text_input",
}
CONTEXT_ELEMENTS = frozenset({"mrkdwn", "plain_text", "image"})
TEXT_TYPES = frozenset({"mrkdwn", "plain_text"})

_USER_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")
_SPECIAL_MENTION = re.compile(r"<!(channel|here|everyone|subteam\^[^>|]*)[^>]*>", re.IGNORECASE)
# A bare @here still pings when `parse=full`/`link_names` is set; our escaper inserts U+2060 after "@".
_BARE_MENTION = re.compile(r"(?<![\w@])@(channel|here|everyone)\b", re.IGNORECASE)


def _check_text_object(obj: Any, path: str, limit: int, *, plain_only: bool = False) -> list[str]:
    if not isinstance(obj, dict) or obj.get("type") not in TEXT_TYPES or not isinstance(obj.get("text"), str):
        return [f"{path}: not a text object"]
    errors = []
    if plain_only and obj["type"] != "plain_text":
        errors.append(f"{path}: must be plain_text")
    if not obj["text"]:
        errors.append(f"{path}: empty text")
    if len(obj["text"]) > limit:
        errors.append(f"{path}: text {len(obj['text'])} > {limit} chars")
    return errors


def _check_confirm(confirm: Any, path: str) -> list[str]:
    if not isinstance(confirm, dict):
        return [f"{path}: confirm must be an object"]
    errors = []
    for key, limit, plain in (
        ("title", 100, True),
        ("text", 300, False),
        ("confirm", 30, True),
        ("deny", 30, True),
    ):
        if key not in confirm:
            errors.append(f"{path}.{key}: missing")
        else:
            errors += _check_text_object(confirm[key], f"{path}.{key}", limit, plain_only=plain)
    if confirm.get("style") not in (None, "primary", "danger"):
        errors.append(f"{path}.style: {confirm.get('style')!r}")
    return errors


def _check_element(el: Any, path: str, allowed: frozenset[str], ids: set[str]) -> list[str]:
    if not isinstance(el, dict):
        return [f"{path}: element must be an object"]
    kind = el.get("type")
    if kind not in allowed:
        return [f"{path}: element type {kind!r} not allowed here"]
    errors = []
    action_id = el.get("action_id")
    if action_id is not None:
        if not isinstance(action_id, str) or not 0 < len(action_id) <= 255:
            errors.append(f"{path}.action_id: must be 1-255 chars")
        elif action_id in ids:
            errors.append(f"{path}.action_id: duplicate {action_id!r}")
        else:
            ids.add(action_id)
    if kind == "button":
        errors += _check_text_object(el.get("text"), f"{path}.text", 75, plain_only=True)
        if len(str(el.get("value", ""))) > 2000:
            errors.append(f"{path}.value: > 2000 chars")
        if len(str(el.get("url", ""))) > 3000:
            errors.append(f"{path}.url: > 3000 chars")
        if el.get("style") not in (None, "primary", "danger"):
            errors.append(f"{path}.style: {el.get('style')!r}")
    elif kind in TEXT_TYPES:
        errors += _check_text_object(el, path, 3000)
    if "confirm" in el:
        errors += _check_confirm(el["confirm"], f"{path}.confirm")
    return errors


def _check_block(block: Any, path: str, surface: str, action_ids: set[str]) -> list[str]:
    if not isinstance(block, dict):
        return [f"{path}: block must be an object"]
    kind = block.get("type")
    if kind not in BLOCK_TYPES:
        return [f"{path}: unknown block type {kind!r}"]
    errors: list[str] = []
    if kind == "section":
        if "text" not in block and "fields" not in block:
            errors.append(f"{path}: section needs text or fields")
        if "text" in block:
            errors += _check_text_object(block["text"], f"{path}.text", 3000)
        fields = block.get("fields", [])
        if len(fields) > 10:
            errors.append(f"{path}.fields: {len(fields)} > 10")
        for i, f in enumerate(fields):
            errors += _check_text_object(f, f"{path}.fields[{i}]", 2000)
        if "accessory" in block:
            errors += _check_element(
                block["accessory"], f"{path}.accessory", INTERACTIVE | {"image"}, action_ids
            )
    elif kind == "header":
        errors += _check_text_object(block.get("text"), f"{path}.text", 150, plain_only=True)
    elif kind in ("context", "actions"):
        elements = block.get("elements") or []
        limit, allowed = (10, CONTEXT_ELEMENTS) if kind == "context" else (25, INTERACTIVE)
        if not elements or len(elements) > limit:
            errors.append(f"{path}.elements: {len(elements)} not in 1..{limit}")
        for i, el in enumerate(elements):
            errors += _check_element(el, f"{path}.elements[{i}]", allowed, action_ids)
    elif kind == "input":
        if surface == "message":
            errors.append(f"{path}: input blocks only in modals")
        errors += _check_text_object(block.get("label"), f"{path}.label", 2000, plain_only=True)
        errors += _check_element(block.get("element"), f"{path}.element", INPUT_ELEMENTS, action_ids)
    return errors


def _sdk_check(block: dict[str, Any], path: str) -> list[str]:
    """Second opinion from slack_sdk's models: enum and length rules we did not restate."""
    try:
        parsed = Block.parse(block)
        if parsed is not None:
            parsed.to_dict()
    except (SlackObjectFormationError, KeyError, TypeError, ValueError) as exc:
        return [f"{path}: slack_sdk: {exc}"]
    return []


def validate_blocks(blocks: Any, surface: str = "message") -> list[str]:
    """Problems with a `blocks` array for `surface` ("message", "modal" or "home")."""
    if not isinstance(blocks, list):
        return ["blocks: must be a list"]
    errors = []
    limit = MAX_BLOCKS[surface]
    if len(blocks) > limit:
        errors.append(f"blocks: {len(blocks)} > {limit} for a {surface}")
    if surface == "message" and (total := sum(len(t) for t in iter_texts(blocks))) > MESSAGE_TEXT_LIMIT:
        errors.append(f"blocks: {total} chars of text > {MESSAGE_TEXT_LIMIT} (msg_blocks_too_long)")
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        path = f"blocks[{i}]"
        # Slack: an action_id "should be unique among all other action_ids in the containing block"
        # (docs.slack.dev/reference/block-kit/block-elements/button-element), so the Home tab may
        # show the same Approve button for several requests, each in its own actions block.
        block_errors = _check_block(block, path, surface, set())
        if isinstance(block, dict) and not block_errors:
            block_errors = _sdk_check(block, path)
        errors += block_errors
        block_id = block.get("block_id") if isinstance(block, dict) else None
        if block_id is not None:
            if not isinstance(block_id, str) or not 0 < len(block_id) <= 255:
                errors.append(f"{path}.block_id: must be 1-255 chars")
            elif block_id in block_ids:
                errors.append(f"{path}.block_id: duplicate {block_id!r}")
            block_ids.add(str(block_id))
    return errors


def validate_view(view: Any) -> list[str]:
    """Problems with a `views.open/update/publish` view payload."""
    if not isinstance(view, dict):
        return ["view: must be an object"]
    kind = view.get("type")
    if kind not in ("modal", "home"):
        return [f"view.type: {kind!r}"]
    errors = validate_blocks(view.get("blocks", []), surface=kind)
    if kind == "modal":
        errors += _check_text_object(view.get("title"), "view.title", 24, plain_only=True)
        for key in ("submit", "close"):
            if key in view:
                errors += _check_text_object(view[key], f"view.{key}", 24, plain_only=True)
        has_input = any(isinstance(b, dict) and b.get("type") == "input" for b in view.get("blocks", []))
        if has_input and "submit" not in view:
            errors.append("view.submit: required when the modal has input blocks")
    if len(str(view.get("private_metadata", ""))) > 3000:
        errors.append("view.private_metadata: > 3000 chars")
    if len(str(view.get("callback_id", ""))) > 255:
        errors.append("view.callback_id: > 255 chars")
    return errors


def validate_text(text: Any) -> list[str]:
    """Top-level `text`: required alongside blocks as the notification fallback; we split at 4,000."""
    if not isinstance(text, str) or not text.strip():
        return ["text: missing top-level fallback text"]
    if len(text) > TEXT_SPLIT_LIMIT:
        return [f"text: {len(text)} chars > {TEXT_SPLIT_LIMIT} (split long messages)"]
    return []


def iter_texts(value: Any) -> Iterator[str]:
    """Every human-visible string in a payload: `text` fields of any nesting depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("text", "title", "alt_text") and isinstance(item, str):
                yield item
            elif key not in ("value", "action_id", "block_id", "private_metadata", "callback_id", "url"):
                yield from iter_texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from iter_texts(item)


def find_mentions(texts: Iterable[str], allowed_users: Iterable[str] = ()) -> list[str]:
    """Live broadcast mentions, and user or group (`subteam^S…`) mentions outside `allowed_users`."""
    allowed = set(allowed_users)
    problems = []
    for text in texts:
        for m in _SPECIAL_MENTION.finditer(text):
            group = m.group(1).partition("^")[2]
            if not (group and group in allowed):  # a group mention is fine where the test allows it
                problems.append(f"unescaped mention {m.group(0)!r}")
        for m in _BARE_MENTION.finditer(text):
            problems.append(f"bare mention {m.group(0)!r}")
        for m in _USER_MENTION.finditer(text):
            if m.group(1) not in allowed:
                problems.append(f"user mention {m.group(0)!r} not in allow-list")
    return problems
