"""Approval messages (the ask, its rewrites, mentions), validated like Slack would."""

from __future__ import annotations

from typing import Any

import pytest

from bot.approval_ui.blocks import (
    approval_decided_blocks,
    approval_expired_blocks,
    approval_request_blocks,
)
from bot.render import ids
from tests.bot.blockkit import (
    NOW,
    approval,
    assert_valid_message,
    buttons,
)


def test_approval_request_for_a_phone() -> None:
    text, blocks = approval_request_blocks(
        approval(), approver_ids=["U0APPROVER", "U0OTHER", "<!here>"], now=NOW
    )
    assert_valid_message((text, blocks))
    assert text.startswith("<@U0APPROVER> <@U0OTHER> Approval needed")  # the notification rings phones
    assert buttons(blocks) == [
        (ids.APPROVE_ONCE, "req-9"),
        (ids.APPROVE_RUN, "req-9"),
        (ids.DENY, "req-9"),
        (ids.DETAILS, "req-9"),
    ]
    approve = blocks[3]["elements"][0]
    assert "confirm" in approve
    assert "```\ncommand(git push --force origin main)\n```" in blocks[1]["text"]["text"]
    assert "<!date^1800000900^" in str(blocks)
    assert "(in 15m 00s)" in str(blocks)
    assert "ask: git push*" in str(blocks)


@pytest.mark.parametrize(
    ("changes", "expect_confirm", "expect_actions"),
    [
        ({"risk": "low"}, False, [ids.APPROVE_ONCE, ids.APPROVE_RUN, ids.DENY, ids.DETAILS]),
        ({"risk": "critical", "scopes": ("once",)}, True, [ids.APPROVE_ONCE, ids.DENY, ids.DETAILS]),
    ],
)
def test_approval_buttons_follow_risk_and_scopes(
    changes: dict[str, Any], expect_confirm: bool, expect_actions: list[str]
) -> None:
    _, blocks = approval_request_blocks(approval(**changes), approver_ids=["U0APPROVER"], now=NOW)
    assert [a for a, _ in buttons(blocks)] == expect_actions
    assert ("confirm" in blocks[3]["elements"][0]) is expect_confirm


def test_long_action_is_truncated_with_details_pointer() -> None:
    _, blocks = approval_request_blocks(approval(action="x" * 9000), approver_ids=[], now=NOW)
    assert_valid_message(("t", blocks))
    assert "tap Details" in blocks[1]["text"]["text"]


@pytest.mark.parametrize(
    ("changes", "phrase"),
    [
        (
            {"status": "approved", "decided_by": "U0APPROVER", "scope": "once"},
            "Approved by <@U0APPROVER> (once) at",
        ),
        ({"status": "approved", "decided_by": "U0APPROVER", "scope": "run"}, "(for this run)"),
        (
            {"status": "denied", "decided_by": "U0APPROVER", "decision_reason": "not on main <!here>"},
            "Denied by <@U0APPROVER> at",
        ),
        ({"status": "expired"}, "Expired at"),
        ({"status": "cancelled"}, "Cancelled"),
    ],
)
def test_decided_and_expired_rewrites_have_no_buttons(changes: dict[str, Any], phrase: str) -> None:
    view = approval(**changes)
    rendered = approval_decided_blocks(view, now=NOW + 60)
    assert_valid_message(rendered)
    assert buttons(rendered[1]) == []
    assert phrase in rendered[1][0]["text"]["text"]


def test_expired_blocks_say_denied() -> None:
    text, blocks = approval_expired_blocks(approval(status="expired"), now=NOW + 2000)
    assert_valid_message((text, blocks))
    assert "denied" in blocks[0]["text"]["text"]


def test_approver_mentions_ring_users_and_groups_and_never_inject() -> None:
    from bot.approval_ui.blocks import approver_mentions

    assert approver_mentions(["U0A", "U0A", "W0B"], ["S0OPS"]) == "<@U0A> <@W0B> <!subteam^S0OPS>"
    # Anything that is not a plain id is dropped, never turned into a live mention.
    assert approver_mentions(["here", "<!channel>", "u0lower"], ["!everyone", "S0X>|x"]) == ""
