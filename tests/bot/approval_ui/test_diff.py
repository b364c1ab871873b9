"""View diff shows exactly the bytes the approval binds (by hash), escaped, chunked within Slack's limits."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.approval_ui import full_text
from bot.approval_ui.blocks import approval_request_blocks, details_problem, home_approval_blocks
from bot.approval_ui.diff import diff_modal, sha256
from bot.render import ids
from tests.bot.blockkit import NOW, approval, assert_valid_view, buttons

_FENCED = re.compile(r"```\n(.*)\n```", re.S)
SCRIPT = (
    "diff --git a/web/index.html b/web/index.html\n"
    "--- a/web/index.html\n+++ b/web/index.html\n@@ -1 +1,2 @@\n"
    "-<p>Tom & Jerry</p>\n+<script>alert('x')</script>\n+<a href=\"?a=1&amp;b=2\">@here &lt;ok&gt;</a>\n"
)


def _unescape(shown: str) -> str:
    text = shown.replace(full_text.FENCE_BREAK, "```").replace("@\u2060", "@")
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _code(view: dict[str, Any]) -> list[str]:
    texts = [b.get("text", {}).get("text", "") for b in view["blocks"] if b["type"] == "section"]
    return [m.group(1) for t in texts if (m := _FENCED.fullmatch(t))]


def test_a_diff_with_markup_and_ampersands_is_shown_escaped_and_exact() -> None:
    view = diff_modal("req-1", SCRIPT, sha256(SCRIPT))
    assert_valid_view(view)
    assert view["callback_id"] == ids.DIFF_MODAL
    assert view["private_metadata"] == "req-1"
    (shown,) = _code(view)
    assert not any(tag in shown for tag in ("<script>", "<a ", "<p>"))
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in shown
    assert "Tom &amp; Jerry" in shown
    assert "a=1&amp;amp;b=2" in shown  # the diff's own "&amp;" is text, shown as typed
    assert "&amp;lt;ok&amp;gt;" in shown
    assert _unescape(shown) == SCRIPT, "every byte, nothing added or lost"
    assert sha256(SCRIPT) in json.dumps(view)
    assert "Cut here" not in json.dumps(view)


def test_a_long_diff_is_chunked_within_slacks_limits_and_says_where_it_is_cut() -> None:
    line = "+" + "x" * 98 + "&\n"  # each `&` grows to `&amp;`: chunks must count escaped characters
    diff = "diff --git a/big b/big\n" + line * 4_000
    view = diff_modal("req-2", diff, sha256(diff))
    assert_valid_view(view)
    assert full_text.fits(view)
    assert len(view["blocks"]) <= full_text.MAX_MODAL_BLOCKS
    pieces = _code(view)
    assert all(len(full_text.FENCE.format(p)) <= full_text.SECTION_TEXT for p in pieces)
    assert all(not re.search(r"&(?:a|am|amp|l|lt|g|gt)?$", p) for p in pieces), "no escape cut in two"
    shown = "".join(_unescape(p) for p in pieces)
    assert diff.startswith(shown)
    assert 0 < len(shown) < len(diff)
    note = view["blocks"][-1]["text"]["text"]
    assert f"the first {len(shown):,} of {len(diff):,} characters" in note
    assert f"lines 1–{shown.count(chr(10)):,} whole, of 4,001" in note
    assert "massgen-bot approvals show req-2" in note


def test_a_diff_that_fits_exactly_is_not_cut() -> None:
    diff = "+" + "y" * (full_text.CHUNK * 20)
    view = diff_modal("req-3", diff, sha256(diff))
    assert "".join(_unescape(p) for p in _code(view)) == diff
    assert len(_code(view)) == 21


def test_bytes_that_miss_the_recorded_hash_are_not_shown_and_not_approvable() -> None:
    tampered = SCRIPT + "+rm -rf /\n"
    for recorded in (sha256(SCRIPT), None):
        view = diff_modal("req-4", tampered, recorded)
        assert _code(view) == []
        assert "do not match the hash" in json.dumps(view)
        card = approval(diff=tampered, diff_sha256=recorded, risk="low")
        _, blocks = approval_request_blocks(card, approver_ids=[], now=NOW)
        assert [a for a, _ in buttons(blocks)] == [ids.DENY, ids.DETAILS, ids.VIEW_DIFF]


def test_a_diff_with_an_invisible_character_is_not_approvable_in_slack() -> None:
    sneaky = "+access = 'user'\u202e // admin\n"
    card = approval(diff=sneaky, diff_sha256=sha256(sneaky), risk="low")
    assert details_problem(card) is not None
    assert _code(diff_modal("req-5", sneaky, sha256(sneaky))) == []
    assert ids.APPROVE_ONCE not in [a for a, _ in buttons(home_approval_blocks(card, NOW))]


def test_view_diff_appears_only_on_requests_that_carry_a_diff() -> None:
    _, plain_blocks = approval_request_blocks(approval(risk="low"), approver_ids=[], now=NOW)
    assert ids.VIEW_DIFF not in [a for a, _ in buttons(plain_blocks)]
    card = approval(diff=SCRIPT, diff_sha256=sha256(SCRIPT), risk="low")
    _, blocks = approval_request_blocks(card, approver_ids=[], now=NOW)
    assert (ids.VIEW_DIFF, "req-9") in buttons(blocks)
    assert ids.APPROVE_ONCE in [a for a, _ in buttons(blocks)]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from("ab <>&`@here\n;lt"), max_size=9_000))
def test_any_showable_diff_round_trips_exactly(diff: str) -> None:
    view = diff_modal("req-6", diff, sha256(diff))
    if full_text.hidden(diff) is None:
        assert "".join(_unescape(p) for p in _code(view)) == diff
        assert_valid_view(view)
