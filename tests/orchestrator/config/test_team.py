"""Team files: MassGen compatibility, presets, defaults, and errors that name file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.team import default_team, load_team, parse_team
from orchestrator.errors import TeamConfigError

TEAMS = Path(__file__).parents[3] / "tests" / "fixtures" / "teams"
ONE = "agents:\n  - id: a\n    backend: {type: openai, model: m}\n"


def test_issue_example_loads() -> None:
    team = load_team(TEAMS / "three.yaml")
    assert [a.backend.type for a in team.agents] == ["openai", "claude", "chatcompletion"]
    assert team.orchestrator.budget_usd == 2.0
    assert team.approvals.approvers == ["U0APPROVER"]
    assert team.workspace.source == (TEAMS / "repo").resolve()
    assert team.warnings == ()


def test_massgen_config_loads_with_warnings() -> None:
    team = load_team(TEAMS / "massgen_three_agents.yaml")
    gemini, openai, grok = (a.backend for a in team.agents)
    assert (gemini.type, gemini.preset, gemini.api_key_env) == ("chatcompletion", "gemini", "GEMINI_API_KEY")
    assert gemini.base_url == "https://generativelanguage.googleapis.com/v1beta/openai/"
    assert gemini.extras == {"enable_web_search": True}
    assert openai.extras == {"reasoning": {"effort": "low", "summary": "auto"}}
    assert grok.preset == "grok"
    assert team.agents[2].system_message == "Be concise."
    assert team.orchestrator.timeout_seconds == 1800
    joined = "\n".join(team.warnings)
    for key in ("voting_sensitivity", "ui", "enable_web_search", "reasoning"):
        assert key in joined


def test_single_agent_key() -> None:
    team = load_team(TEAMS / "single_agent.yaml")
    assert [(a.id, a.backend.type) for a in team.agents] == [("solo", "claude")]


@pytest.mark.parametrize(
    ("text", "line", "key", "needle"),
    [
        (
            ONE + "  - id: b\n    backend:\n      type: foo\n      model: m\n",
            6,
            "agents[1].backend.type",
            "unknown backend 'foo' (expected one of openai, claude, chatcompletion, grok",
        ),
        (
            ONE + "orchestrator:\n  max_roundz: 3\n",
            5,
            "orchestrator.max_roundz",
            "Extra inputs",
        ),
        (ONE + "bogus: 1\n", 4, "bogus", "unknown key"),
        (
            ONE + "orchestrator: {max_rounds: 0}\n",
            4,
            "orchestrator.max_rounds",
            "greater than or equal to 1",
        ),
        (
            ONE + "permissions:\n  policy: yolo\n",
            5,
            "permissions.policy",
            "human",
        ),
        (
            ONE + "permissions:\n  rules: {allow: ['nonsense(x)']}\n",
            5,
            "permissions.rules",
            "unknown action",
        ),
        (
            ONE + "approvals:\n  approvers: [U1]\n  quorum: 0\n",
            6,
            "approvals.quorum",
            "greater than",
        ),
        (
            ONE + "  - id: a\n    backend: {type: openai, model: m}\n",
            1,
            "agents",
            "duplicate agent id",
        ),
        (
            "agents:\n  - id: a\n    backend: {model: m}\n",
            3,
            "agents[0].backend.type",
            "missing backend type",
        ),
        ("agents: []\n", 1, "agents", "at least 1"),
        (
            ONE + "workspace: {source: ./missing}\n",
            4,
            "workspace.source",
            "not a directory",
        ),
        ("agents:\n  - id: a\n   backend: {type: openai}\n", 3, "", "invalid YAML"),
        ("- just a list\n", 1, "", "must be a mapping"),
        ("agent: {id: a, backend: {type: openai, model: m}}\nagents: []\n", 1, "agent", "either"),
    ],
)
def test_errors_name_line_and_key(text: str, line: int, key: str, needle: str, tmp_path: Path) -> None:
    with pytest.raises(TeamConfigError) as info:
        parse_team(text, base_dir=tmp_path, source="team.yaml")
    error = info.value
    assert (error.line, error.key) == (line, key)
    assert needle in str(error)
    assert str(error).startswith(f"team.yaml:{line}: ")


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(TeamConfigError, match="cannot read team file"):
        load_team(tmp_path / "nope.yaml")


def test_unknown_model_price_is_warned_and_local_presets_are_free(tmp_path: Path) -> None:
    text = (
        "agents:\n  - id: a\n    backend: {type: openai, model: my-model}\n"
        "  - id: b\n    backend: {type: ollama, model: llama3}\n"
    )
    team = parse_team(text, base_dir=tmp_path)
    assert len(team.warnings) == 1
    assert "my-model" in team.warnings[0]
    team = parse_team(
        text + "prices:\n  default: {input_per_mtok: 1, output_per_mtok: 2}\n", base_dir=tmp_path
    )
    assert team.warnings == ()


def test_default_team_one_agent_per_backend_type() -> None:
    team = default_team({"MASSGEN_OPENAI_MODEL": "gpt-4.1-mini"})
    assert [a.backend.type for a in team.agents] == ["openai", "claude", "chatcompletion"]
    assert team.agents[0].backend.model == "gpt-4.1-mini"
    assert team.agents[2].backend.preset == "ollama"
    assert team.orchestrator.final_answer_strategy == "winner_present"
