"""The playground's door: its sorted `__all__` is exactly its public API."""

from __future__ import annotations

from tests.doors import assert_door


def test_the_playground_door_is_pinned() -> None:
    assert_door(
        "bot.playground",
        [
            "APPROVER",
            "BYSTANDER",
            "CHANNEL",
            "PEOPLE",
            "REQUESTER",
            "Page",
            "Person",
            "Playground",
            "SlackEmulator",
            "TeamPick",
            "Workspace",
            "playground_team",
            "serve_playground",
        ],
    )
