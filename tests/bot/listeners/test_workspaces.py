"""Who the bot serves: the team of the person behind each kind of payload, against the allowed ids."""

from __future__ import annotations

from typing import Any

import pytest

from bot.listeners.workspaces import Workspaces

OURS = Workspaces(frozenset({"T0OURS", "E0OURS"}))

_CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("our command", {"team_id": "T0OURS", "user_id": "U1"}, True),
    ("their command", {"team_id": "T0THEM", "enterprise_id": "E0THEM"}, False),
    ("a command from our Grid org's other workspace", {"team_id": "T0SIB", "enterprise_id": "E0OURS"}, True),
    ("our click", {"user": {"id": "U1", "team_id": "T0OURS"}, "team": {"id": "T0OURS"}}, True),
    ("a Grid click (user.team_id is the org)", {"user": {"id": "U1", "team_id": "E0OURS"}}, True),
    ("a guest's click", {"user": {"id": "U9", "team_id": "T0THEM"}, "team": {"id": "T0OURS"}}, False),
    ("our mention", {"team_id": "T0OURS", "event": {"team": "T0OURS"}}, True),
    (
        "a Slack Connect mention",
        {"team_id": "T0OURS", "enterprise_id": "E0OURS", "event": {"user_team": "T0THEM", "team": "T0THEM"}},
        False,
    ),
    ("Home without a user team", {"team_id": "T0OURS", "event": {"type": "app_home_opened"}}, True),
]


@pytest.mark.parametrize(("payload", "admitted"), [(p, a) for _, p, a in _CASES], ids=[c[0] for c in _CASES])
def test_admits(payload: dict[str, Any], admitted: bool) -> None:
    assert OURS.admits(payload) is admitted


def test_the_setting_wins_over_auth_test_and_unknown_admits_with_a_warning() -> None:
    assert Workspaces.of("T0A, T0B", {"team_id": "T0OURS"}).allowed == {"T0A", "T0B"}
    assert Workspaces.of("", {"team_id": "T0OURS", "enterprise_id": "E0OURS"}).allowed == {"T0OURS", "E0OURS"}
    assert Workspaces.of("", {}).admits({"team_id": "T0ANY"})
