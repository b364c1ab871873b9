"""The pre-run key check: which agents have no provider key, and the variable each should set."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import missing_keys, parse_team


def team(*backends: str) -> str:
    return "agents:\n" + "".join(f"  - {{id: a{i}, backend: {b}}}\n" for i, b in enumerate(backends))


@pytest.mark.parametrize(
    ("backend", "env", "missing"),
    [
        ("{type: openai, model: m}", {}, "OPENAI_API_KEY"),
        ("{type: openai, model: m}", {"OPENAI_API_KEY": "k"}, None),
        ("{type: openai, model: m}", {"OPENAI_API_KEY": ""}, "OPENAI_API_KEY"),  # blank is unset
        ("{type: openai, model: m, api_key: k}", {}, None),
        ("{type: claude, model: m}", {"OPENAI_API_KEY": "k"}, "ANTHROPIC_API_KEY"),
        ("{type: anthropic, model: m}", {"ANTHROPIC_API_KEY": "k"}, None),
        ("{type: groq, model: m}", {"OPENAI_API_KEY": "k"}, "GROQ_API_KEY"),  # a preset's own variable
        ("{type: groq, model: m}", {"GROQ_API_KEY": "k"}, None),
        ("{type: chatcompletion, model: m}", {}, "OPENAI_API_KEY"),
        ("{type: ollama, model: m}", {}, None),  # local server: no key
        ("{type: chatcompletion, model: m, base_url: 'http://127.0.0.1:1/v1'}", {}, None),  # private server
        ("{type: openai, model: m}", {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, None),
        ("{type: claude, model: m}", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}, None),
        ("{type: local}", {}, None),
    ],
)
def test_missing_keys_names_the_variable(backend: str, env: dict[str, str], missing: str | None) -> None:
    found = missing_keys(parse_team(team(backend), base_dir=Path()), env)
    assert found == ({"a0": missing} if missing else {})


def test_every_agent_without_a_key_is_listed() -> None:
    backends = ("{type: openai, model: m}", "{type: ollama, model: m}", "{type: claude, model: m}")
    config = parse_team(team(*backends), base_dir=Path())
    assert missing_keys(config, {}) == {"a0": "OPENAI_API_KEY", "a2": "ANTHROPIC_API_KEY"}
