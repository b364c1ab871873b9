"""The model-file preflight: a local agent's missing GGUF is found when the team is checked, not at a run."""

from __future__ import annotations

from pathlib import Path

from orchestrator import load_team
from orchestrator.llm.factory import missing_model_files


def _team(tmp_path: Path, model_path: str) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(
        "agents:\n"
        f"  - id: here\n    backend: {{type: local, model_path: {model_path}}}\n"
        "  - id: remote\n    backend: {type: openai, model: gpt-4o-mini, api_key: k}\n"
    )
    return path


def test_a_missing_model_file_is_named_by_agent(tmp_path: Path) -> None:
    team = load_team(_team(tmp_path, "./gone.gguf"))
    assert missing_model_files(team) == {
        "here": f"model_path {str(tmp_path / 'gone.gguf')!r} is not a file (a GGUF model is needed)"
    }


def test_a_present_model_file_and_remote_agents_pass(tmp_path: Path) -> None:
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    assert missing_model_files(load_team(_team(tmp_path, "./tiny.gguf"))) == {}


def test_a_folder_is_not_a_model_file(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    assert list(missing_model_files(load_team(_team(tmp_path, "./models")))) == ["here"]
