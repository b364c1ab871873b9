"""The outbox's budgets shared by the app's processes: each keeps its share, a joiner adds no burst."""

from __future__ import annotations

import pytest

from bot.slack.outbox_budget import Budgets

TIERS = {2: 18, 3: 40, 4: 90, 5: 90}


def _admitted(budgets: Budgets, method: str, seconds: float, *, start: float = 0.0) -> int:
    """How many calls of `method` the budgets let through in `seconds`, calling as fast as allowed."""
    now, calls = start, 0
    while now < start + seconds:
        wait = budgets.wait_time(method, now)
        if wait > 0:
            now += wait
            continue
        budgets.take(method, now)
        calls += 1
    return calls


def test_a_half_share_admits_half_the_calls() -> None:
    alone = Budgets(TIERS, 60.0, posts_per_minute=240)
    shared = Budgets(TIERS, 60.0, posts_per_minute=240)
    shared.set_share(0.5, 0.0)
    full, half = _admitted(alone, "chat.update", 600.0), _admitted(shared, "chat.update", 600.0)
    assert full == pytest.approx(400, abs=5)  # 40 a minute
    assert half == pytest.approx(200, abs=5)


def test_a_process_that_knows_it_is_not_alone_starts_without_a_burst() -> None:
    joiner = Budgets(TIERS, 60.0, posts_per_minute=240)
    joiner.set_share(0.5, 0.0)
    assert joiner.wait_time("chat.update", 0.0) > 0  # its bucket fills from empty
    alone = Budgets(TIERS, 60.0, posts_per_minute=240)
    assert alone.wait_time("chat.update", 0.0) == 0


def test_a_share_shrunk_drops_saved_tokens_and_grown_gives_the_rate_back() -> None:
    budgets = Budgets(TIERS, 60.0, posts_per_minute=240)
    assert _admitted(budgets, "chat.update", 1.0) == 4  # the burst of a full bucket
    budgets.set_share(0.25, 100.0)  # idle meanwhile: its bucket was full again
    assert _admitted(budgets, "chat.update", 0.001, start=100.0) == 1  # capacity 1 at a quarter
    budgets.set_share(1.0, 200.0)  # the whole rate again, but no burst on top of what was saved
    assert _admitted(budgets, "chat.update", 60.0, start=200.0) == pytest.approx(41, abs=1)


@pytest.mark.parametrize("share", [0.0, -1.0, 1.5])
def test_a_share_outside_zero_to_one_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="share"):
        Budgets(TIERS, 60.0, posts_per_minute=240).set_share(share, 0.0)
