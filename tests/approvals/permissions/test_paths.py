"""Path boundaries: normalisation, symlinks (link and target), secrets, protected files, read-only roots."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.permissions.boundaries.paths import Boundary
from approvals.permissions.engine import PermissionConfig, PermissionEngine
from approvals.permissions.model.actions import Action

HOME = Path("/home/tester")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("x = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (ws / "link_out").symlink_to(outside / "secret.txt")
    (ws / "link_in").symlink_to(ws / "src" / "a.py")
    (ws / "dir_out").symlink_to(outside)
    return ws


def _engine(workspace: Path, **kwargs: object) -> PermissionEngine:
    return PermissionEngine(PermissionConfig(workspace=workspace, home=HOME, **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "target", "verdict", "layer"),
    [
        ("read", "src/a.py", "allow", "boundary"),
        ("read", "./src/../src/a.py", "allow", "boundary"),
        ("write", "src/new.py", "allow", "boundary"),
        ("read", "link_in", "allow", "boundary"),
        ("read", "link_out", "ask", "boundary"),  # target outside
        ("write", "dir_out/x.txt", "ask", "boundary"),  # through a symlinked directory
        ("read", "src/../../outside/secret.txt", "ask", "boundary"),
        ("write", "../x", "ask", "boundary"),
        ("write", "/etc/hosts", "deny", "floor"),  # engine v2: a system file
        ("read", "/etc/hosts", "ask", "boundary"),
        ("read", "~/notes.md", "ask", "boundary"),
        ("write", ".git/hooks/pre-commit", "ask", "boundary"),
        ("write", ".git/config", "ask", "boundary"),
        ("read", ".git/config", "allow", "boundary"),
        ("write", ".massgen/policy.yaml", "ask", "boundary"),
        ("read", "/dev/null", "allow", "boundary"),
        ("write", "/dev/sda", "deny", "floor"),
    ],
)
def test_path_actions(workspace: Path, kind: str, target: str, verdict: str, layer: str) -> None:
    decision = _engine(workspace).evaluate(Action(kind=kind, target=target))  # type: ignore[arg-type]
    assert (decision.verdict, decision.layer) == (verdict, layer), decision


@pytest.mark.parametrize(
    "target",
    [
        "~/.ssh/id_rsa", "~/.ssh", "~/.aws/credentials", "~/.config/gcloud/adc.json",
        ".env", "config/.env.production", "app/prod.env", "/etc/shadow", "/etc/sudoers.d/x", "~/.bashrc",
        "~/.zshrc", "~/.profile", "certs/server.key", "tls/cert.pem", "id_ed25519", "/proc/self/environ",
        "/root/.bash_history", "~/.netrc", "~/.git-credentials", "~/.kube/config",
    ],
)  # fmt: skip
def test_secrets_ask_with_high_risk_and_are_never_auto_resolved(workspace: Path, target: str) -> None:
    for kind in ("read", "write"):
        for policy in ("risk-based", "allow-all", "deny-all"):
            decision = _engine(workspace, policy=policy).evaluate(Action(kind=kind, target=target))
            expected = ("ask", "high", "boundary", "deny")
            if kind == "write" and target.startswith(("/etc/", "/proc/", "/root/", "/usr/", "/var/lib/")):
                # engine v2: overwriting a file in a system tree is the floor's
                expected = ("deny", "critical", "floor", "deny")
            assert (decision.verdict, decision.risk, decision.layer, decision.resolved) == expected, (
                kind, target, policy, decision,
            )  # fmt: skip


@pytest.mark.parametrize(
    "target", [".env.example", "docs/.env.sample", "src/env.py", "keys.md", "id_rsa.pub"]
)
def test_near_misses_are_not_secrets(workspace: Path, target: str) -> None:
    assert _engine(workspace).evaluate(Action(kind="read", target=target)).verdict == "allow"


def test_secret_reached_through_a_symlink_is_a_secret(workspace: Path, tmp_path: Path) -> None:
    (workspace / "innocent.txt").symlink_to(workspace / ".env")
    decision = _engine(workspace).evaluate(Action(kind="read", target="innocent.txt"))
    assert decision.verdict == "ask"
    assert "secret" in decision.reason


def test_readable_roots_are_readable_but_never_writable(workspace: Path, tmp_path: Path) -> None:
    peer = tmp_path / "peer"
    peer.mkdir()
    engine = _engine(workspace, readable_roots=(peer,))
    assert engine.evaluate(Action(kind="read", target=str(peer / "answer.md"))).verdict == "allow"
    assert engine.evaluate(Action(kind="write", target=str(peer / "answer.md"))).verdict == "ask"
    assert engine.evaluate(Action(kind="command", target=f"cat {peer}/answer.md")).verdict == "allow"
    assert engine.evaluate(Action(kind="command", target=f"cp x {peer}/answer.md")).verdict == "ask"


def test_prefix_does_not_count_as_inside(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    boundary = Boundary.create(str(ws), str(HOME))
    assert boundary.judge(str(tmp_path / "ws2" / "x"), write=False).klass == "outside"
    assert boundary.judge(str(ws / "x"), write=False).klass == "inside"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("~", str(HOME)),
        ("~/a/../b", f"{HOME}/b"),
        ("/a//b/./c", "/a/b/c"),
        ("//etc", "/etc"),
        ("~root/x", "/root/x"),
    ],
)
def test_absolute_normalises(tmp_path: Path, text: str, expected: str) -> None:
    assert Boundary.create(str(tmp_path), str(HOME)).absolute(text) == expected


def test_command_paths_follow_cd(workspace: Path) -> None:
    engine = _engine(workspace)
    assert engine.evaluate(Action(kind="command", target="cd src && rm a.py")).verdict == "allow"
    assert engine.evaluate(Action(kind="command", target="cd .. && rm -rf outside")).verdict == "ask"
    assert engine.evaluate(Action(kind="command", target="cd $X && rm -rf y")).verdict == "ask"


def test_workspace_given_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "src").mkdir(parents=True)
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    engine = _engine(alias)
    assert engine.evaluate(Action(kind="write", target=str(alias / "src" / "a.py"))).verdict == "allow"
    assert engine.evaluate(Action(kind="write", target=str(real / "src" / "a.py"))).verdict == "allow"
    assert engine.evaluate(Action(kind="write", target="src/a.py")).verdict == "allow"
    assert engine.evaluate(Action(kind="write", target=str(tmp_path / "other"))).verdict == "ask"


@pytest.mark.parametrize(
    ("text", "verdict", "sensitive_reason"),
    [
        ("bash -c 'cd /data && rm -rf build'", "ask", None),
        ("(cd /data && rm -rf x)", "ask", None),
        ("cd /data; (cd src); rm -rf x", "ask", None),  # which cd a subshell undid is not tracked: ask
        ("cd ~/.ssh && ls", "ask", "secret"),
        ("cd / && grep -r password", "ask", "secrets"),
        ("cd $X && ls", "ask", None),
        ("cd src && rm -rf build", "allow", None),
    ],
)
def test_commands_are_judged_in_every_directory_they_may_run_in(
    workspace: Path, text: str, verdict: str, sensitive_reason: str | None
) -> None:
    decision = _engine(workspace).evaluate(Action(kind="command", target=text))
    assert decision.verdict == verdict, decision
    if sensitive_reason:
        assert sensitive_reason in decision.reason
