"""The boot-time warm-up streams one canned turn through each adapter the team needs, offline."""

from __future__ import annotations

import pytest

from orchestrator.llm.warmup import warm_up


@pytest.mark.parametrize(
    ("types", "apis"),
    [
        (["openai", "claude", "chatcompletion"], ["chat", "messages", "responses"]),
        (["groq", "ollama"], ["chat"]),
        (["anthropic"], ["messages"]),
        ([], []),
    ],
)
def test_each_api_the_team_uses_is_warmed_once(types: list[str], apis: list[str]) -> None:
    assert warm_up(types) == apis
