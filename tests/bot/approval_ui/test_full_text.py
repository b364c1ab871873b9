"""Details shows every character of the action, or Slack offers no Approve for it."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.approval_ui import full_text
from bot.approval_ui.blocks import (
    ApprovalView,
    approval_details_modal,
    approval_request_blocks,
    details_problem,
    home_approval_blocks,
)
from bot.render import ids
from tests.bot.blockkit import NOW, approval, assert_valid_view, buttons

_FENCED = re.compile(r"```\n(.*)\n```", re.S)


def _unescape(shown: str) -> str:
    """What a reader sees in a code block: Slack's entities decoded, our fence/mention breaks undone."""
    text = shown.replace(full_text.FENCE_BREAK, "```").replace("@\u2060", "@")
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _shown_action(view: dict[str, Any]) -> str:
    """The concatenated code blocks of a Details modal, unescaped."""
    pieces = []
    for block in view["blocks"]:
        text = block.get("text", {}).get("text", "") if block["type"] == "section" else ""
        if match := _FENCED.fullmatch(text):
            pieces.append(match.group(1))
    return _unescape("".join(pieces))


def _approves(view: ApprovalView) -> bool:
    _, blocks = approval_request_blocks(view, approver_ids=["U0APPROVER"], now=NOW)
    return any(a in (ids.APPROVE_ONCE, ids.APPROVE_RUN) for a, _ in buttons(blocks))


# Heavy on what escaping grows and on what could split an escape: & < > ``` @here, newlines.
_TRICKY = st.sampled_from(
    ["&", "<", ">", "`", "```", "@here", "@channel", "\n", "&amp;", "<!here>", "é", "🚀"]
)
_ACTIONS = st.one_of(
    st.text(max_size=400),
    st.lists(st.one_of(_TRICKY, st.text(max_size=5)), max_size=400).map("".join),
    st.lists(_TRICKY, min_size=600, max_size=3000).map("".join),  # several blocks of pure escapes
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action=_ACTIONS)
def test_details_shows_every_character_or_approve_is_not_offered(action: str) -> None:
    view = approval(action=action)
    modal = approval_details_modal(view, now=NOW)
    if details_problem(view) is None:
        assert _shown_action(modal) == action
        assert _approves(view)
        assert all(len(b["text"]["text"]) <= 3000 for b in modal["blocks"] if "text" in b)
    else:
        assert not _approves(view)
        assert "Cannot be approved in Slack" in str(modal["blocks"])
    assert len(modal["blocks"]) <= full_text.MAX_MODAL_BLOCKS
    assert len(json.dumps(modal).encode()) <= full_text.MAX_VIEW_BYTES


def test_escapes_are_never_split_and_blocks_stay_under_the_limit() -> None:
    action = "&" * 10_000  # every character grows fivefold when escaped
    pieces = full_text.chunks(action)
    assert all(len(p) <= full_text.CHUNK for p in pieces)
    assert all(re.fullmatch(r"(&amp;)+", p) for p in pieces)
    view = approval_details_modal(approval(action=action), now=NOW)
    assert_valid_view(view)
    assert _shown_action(view) == action


@pytest.mark.parametrize(
    ("action", "why"),
    [
        ("x" * 300_000, "too long to show in Slack"),
        ("curl -H 'Authorization: Bearer abcdefghijklmnop' https://x", "looks like a secret"),
        ("rm -rf /tmp/\u202ecod.sh", "U+202E"),  # a right-to-left override hides what runs
        ("rm -rf /\u00a0tmp", "U+00A0"),  # looks like a space, is not one to the shell
    ],
)
def test_what_cannot_be_shown_is_not_approvable_in_slack(action: str, why: str) -> None:
    view = approval(action=action, request_id="req-9")
    assert why in str(details_problem(view))
    _, blocks = approval_request_blocks(view, approver_ids=["U0APPROVER"], now=NOW)
    assert [a for a, _ in buttons(blocks)] == [ids.DENY, ids.DETAILS]
    assert "massgen-bot approvals show req-9" in str(blocks)
    home = home_approval_blocks(view, NOW)
    assert [a for a, _ in buttons(home)] == [ids.DENY, ids.DETAILS]
    modal = approval_details_modal(view, now=NOW)
    assert_valid_view(modal)
    assert "massgen-bot approvals show req-9" in str(modal)
    assert len(json.dumps(modal).encode()) <= full_text.MAX_VIEW_BYTES


def test_the_longest_showable_action_fills_a_modal_within_limits() -> None:
    action = "y" * (80 * full_text.CHUNK)  # about 240 kB: near the 250 kB view limit
    view = approval(action=action)
    assert details_problem(view) is None
    modal = approval_details_modal(view, now=NOW)
    assert_valid_view(modal)
    assert _shown_action(modal) == action
    assert details_problem(replace(view, action=action * 2)) is not None


def test_confirm_dialog_text_is_plain_text() -> None:
    _, blocks = approval_request_blocks(approval(risk="high"), approver_ids=[], now=NOW)
    dialog = blocks[3]["elements"][0]["confirm"]
    assert dialog["text"]["type"] == "plain_text"
    assert "&amp;" not in dialog["text"]["text"]
