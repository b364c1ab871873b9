"""The App Home view, validated like Slack would."""

from __future__ import annotations

import dataclasses

from bot.home.blocks import home_view
from tests.bot.blockkit import (
    EVIL,
    NOW,
    approval,
    assert_valid_view,
)


def test_home_view_with_many_approvals_and_runs() -> None:
    @dataclasses.dataclass
    class Run:
        run_id: str
        channel: str
        task: str
        state: str
        created_at: float

    pending = [approval(request_id=f"req-{i}", risk="low" if i % 2 else "high") for i in range(14)]
    runs = [Run(f"run-{i}", "C0GENERAL", f"task {i} {EVIL}", "finished", NOW - i * 60) for i in range(20)]
    view = home_view(pending, runs, now=NOW)
    assert_valid_view(view)
    assert "and 4 more" in str(view["blocks"])
    assert "<#C0GENERAL>" in str(view["blocks"])
    assert_valid_view(home_view([], [], now=NOW))
