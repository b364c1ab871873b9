"""Secrets files of the source stay out of the agents' workspaces (and so out of every patch),
unless the team file opts in; the team file can extend the list."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config.team import WorkspaceConfig
from orchestrator.tools.workspace import RunWorkspaces, secret_patterns

SECRETS = [
    ".env",
    ".env.production",
    "config/.npmrc",
    "deploy/tls.pem",
    "deploy/tls.key",
    "home/.ssh/id_ed25519",
    "keys/id_rsa.pub",
    ".aws/credentials",
    "gcp/credentials.json",
    ".netrc",
    ".pypirc",
]
ORDINARY = ["app.py", "README.md", "config/settings.toml", "keys/README", "src/env.py", "docs/keyboard.md"]


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    for rel in [*SECRETS, *ORDINARY, "vault/token.txt"]:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(f"content of {rel}\n")
    return src


def _files(top: Path) -> set[str]:
    return {str(p.relative_to(top)) for p in top.rglob("*") if p.is_file()}


def test_secrets_are_not_copied_and_never_appear_in_the_patch(tmp_path: Path) -> None:
    source = _source(tmp_path)
    config = WorkspaceConfig(source=source, secrets=["vault"])  # the team file extends the list
    spaces = RunWorkspaces.create(
        root=tmp_path / "ws",
        run_id="r1",
        agent_ids=("a", "b"),
        source=source,
        secrets=secret_patterns(config),
    )
    for agent in ("a", "b"):
        present = _files(spaces.path(agent))
        assert present == set(ORDINARY), present
    (spaces.path("a") / "app.py").write_text("changed\n")
    patch = spaces.patch("a")
    assert patch is not None
    assert ".env" not in patch
    assert "vault" not in patch
    assert (source / ".env").exists()  # the source keeps them


def test_the_team_can_opt_in_to_copying_secrets(tmp_path: Path) -> None:
    source = _source(tmp_path)
    config = WorkspaceConfig(source=source, copy_secrets=True)
    spaces = RunWorkspaces.create(
        root=tmp_path / "ws", run_id="r1", agent_ids=("a",), source=source, secrets=secret_patterns(config)
    )
    assert set(SECRETS) <= _files(spaces.path("a"))


def test_secrets_are_left_out_by_default(tmp_path: Path) -> None:
    source = _source(tmp_path)
    spaces = RunWorkspaces.create(root=tmp_path / "ws", run_id="r1", agent_ids=("a",), source=source)
    assert _files(spaces.path("a")) == {*ORDINARY, "vault/token.txt"}
