"""The `/massgen settings` modal, and reading a submitted one back (validated against the choices).

Pure: builders return Block Kit dicts; `read_submission` turns `view.state.values` into
`ChannelDefaults` or a map of block id -> error, which the listener acks with
`response_action: errors` so Slack shows each problem under its field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bot.channel_settings.defaults import MAX_APPROVERS, ChannelDefaults, Choices
from bot.render import ids
from bot.render.escape import code, plain
from bot.render.kit import Block, context, section
from bot.render.views import modal

_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")
_GROUP_ID = re.compile(r"S[A-Z0-9]{2,}")
_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,}")
MAX_OPTIONS = 100  # Slack: a static_select holds at most 100 options


def _option(name: str) -> Block:
    return {"text": {"type": "plain_text", "text": plain(name, 75)}, "value": name[:150]}


def _select(block_id: str, label: str, names: Sequence[str], current: str | None, hint: str) -> Block:
    element: Block = {
        "type": "static_select",
        "action_id": ids.SETTING_INPUT,
        "placeholder": {"type": "plain_text", "text": "Team file default"},
        "options": [_option(n) for n in names[:MAX_OPTIONS]],
    }
    if current is not None and current in names[:MAX_OPTIONS]:
        element["initial_option"] = _option(current)
    return {
        "type": "input",
        "block_id": block_id,
        "optional": True,
        "label": {"type": "plain_text", "text": label},
        "hint": {"type": "plain_text", "text": hint},
        "element": element,
    }


def settings_modal(channel: str, current: ChannelDefaults | None, choices: Choices) -> Block:
    """`views.open` payload for a channel's settings (callback `ids.SETTINGS_MODAL`, metadata = channel)."""
    saved = current or ChannelDefaults()
    where = f"<#{channel}>" if _CHANNEL_ID.fullmatch(channel) else code(channel, 32)
    blocks: list[Block] = [section(f"Defaults for runs started in {where}. Empty means the team file's.")]
    if choices.repositories:
        hint = "Used when a request names no repository (--repo NAME, repo=NAME)."
        blocks.append(
            _select(ids.SETTING_REPOSITORY, "Repository", choices.repositories, saved.repository, hint)
        )
    else:
        blocks.append(context("No repositories are configured (`repositories:` in the team file)."))
    if choices.teams:
        hint = "Used when a request names no team (--team NAME)."
        blocks.append(_select(ids.SETTING_TEAM, "Team", choices.teams, saved.team, hint))
    hint = "Used when a request names no policy (--policy NAME)."
    blocks.append(_select(ids.SETTING_POLICY, "Policy", choices.policies, saved.policy, hint))
    users: Block = {
        "type": "multi_users_select",
        "action_id": ids.SETTING_INPUT,
        "max_selected_items": MAX_APPROVERS,
    }
    if saved.approvers:
        users["initial_users"] = list(saved.approvers)
    blocks.append(_input(ids.SETTING_APPROVERS, "Approvers (added to the team file's)", users))
    group: Block = {
        "type": "plain_text_input",
        "action_id": ids.SETTING_INPUT,
        "max_length": 32,
        "placeholder": {"type": "plain_text", "text": "S0123ABCD"},
    }
    if saved.approver_group:
        group["initial_value"] = saved.approver_group
    blocks.append(_input(ids.SETTING_GROUP, "Approver user group id", group))
    blocks.append(
        context("Only this channel's approvers and workspace admins can change these; changes are audited.")
    )
    return modal(
        ids.SETTINGS_MODAL,
        "Channel settings",
        blocks,
        submit={"type": "plain_text", "text": "Save"},
        private_metadata=channel[:3000],
    )


def _input(block_id: str, label: str, element: Block) -> Block:
    return {
        "type": "input",
        "block_id": block_id,
        "optional": True,
        "label": {"type": "plain_text", "text": label},
        "element": element,
    }


def _value(values: Mapping[str, Any], block_id: str) -> Mapping[str, Any]:
    block = values.get(block_id)
    element = block.get(ids.SETTING_INPUT) if isinstance(block, Mapping) else None
    return element if isinstance(element, Mapping) else {}


def _selected(values: Mapping[str, Any], block_id: str) -> str | None:
    option = _value(values, block_id).get("selected_option")
    value = option.get("value") if isinstance(option, Mapping) else None
    return value if isinstance(value, str) and value else None


def read_submission(values: Mapping[str, Any], choices: Choices) -> ChannelDefaults | dict[str, str]:
    """The submitted settings, or `{block_id: error}` for every field that is not one of the choices.

    A submission is Slack's, signed; its values are still checked against the names configured now
    (a modal opened before a repository was removed must not save a name that no longer exists).
    """
    errors: dict[str, str] = {}
    picked: dict[str, str | None] = {}
    for block_id, allowed in (
        (ids.SETTING_REPOSITORY, choices.repositories),
        (ids.SETTING_TEAM, choices.teams),
        (ids.SETTING_POLICY, choices.policies),
    ):
        name = _selected(values, block_id)
        if name is not None and name not in allowed:
            errors[block_id] = f"Not one of the configured names: {', '.join(allowed) or 'none'}."
        picked[block_id] = name
    users = _value(values, ids.SETTING_APPROVERS).get("selected_users") or []
    approvers = tuple(dict.fromkeys(u for u in users if isinstance(u, str)))
    if len(approvers) > MAX_APPROVERS or not all(_USER_ID.fullmatch(u) for u in approvers):
        errors[ids.SETTING_APPROVERS] = f"Pick at most {MAX_APPROVERS} people."
    raw = _value(values, ids.SETTING_GROUP).get("value")
    group = raw.strip() if isinstance(raw, str) and raw.strip() else None
    if group is not None and not _GROUP_ID.fullmatch(group):
        errors[ids.SETTING_GROUP] = "A user group id starts with S (e.g. S0123ABCD)."
    if errors:
        return errors
    return ChannelDefaults(
        repository=picked[ids.SETTING_REPOSITORY],
        team=picked[ids.SETTING_TEAM],
        policy=picked[ids.SETTING_POLICY],
        approvers=approvers,
        approver_group=group,
    )


def saved_text(changes: Sequence[tuple[str, str | None, str | None]]) -> str:
    """The ephemeral confirmation: each changed field, old -> new."""
    if not changes:
        return "Channel settings unchanged."
    lines = [f"• {field}: {_shown(old)} → {_shown(new)}" for field, old, new in changes]
    return "*Channel settings saved* (audited):\n" + "\n".join(lines)


def _shown(value: str | None) -> str:
    return "unset" if value is None else code(value, 600)
