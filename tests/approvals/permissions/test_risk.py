"""Risk classifier: deterministic tables; side effects and egress flags for the orchestrator."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.permissions.engine import PermissionConfig, PermissionEngine
from approvals.permissions.model.actions import Action
from approvals.permissions.risk.classify import classify
from approvals.permissions.shell.invocation import expand


def _risk(text: str) -> tuple[str, bool, bool]:
    """The riskiest invocation (`sudo ls` is sudo's risk, not ls's)."""
    order = ["low", "medium", "high", "critical"]
    info = max((classify(inv) for inv in expand(text).invocations), key=lambda i: order.index(i.risk))
    return info.risk, info.egress, info.side_effect


@pytest.mark.parametrize(
    ("text", "risk", "egress", "side_effect"),
    [
        ("ls -la", "low", False, False),
        ("git status", "low", False, False),
        ("git log -p", "low", False, False),
        ("git commit -m x", "low", False, False),
        ("make test", "low", False, False),
        ("cargo test", "low", False, False),
        ("python -m pytest", "low", False, False),
        ("python3 -c 'print(2**10)'", "low", False, False),
        ("frobnicate --all", "medium", False, False),
        ("git frobnicate", "medium", False, False),
        ("curl https://x.example", "high", True, False),
        ("curl -X POST https://x.example", "high", True, True),
        ("curl --data @f https://x.example", "high", True, True),
        ("wget --post-data=a https://x.example", "high", True, True),
        ("git clone https://x.example/r", "high", True, False),
        ("git fetch", "high", True, False),
        ("git pull", "high", True, False),
        ("git push", "high", True, True),
        ("git push --force", "high", True, True),
        ("pip install x", "high", True, False),
        ("pip3.12 install x", "high", True, False),
        ("npm ci", "high", True, False),
        ("npm publish", "high", True, True),
        ("twine upload dist/*", "high", True, True),
        ("docker push img", "high", True, True),
        ("gh release create v1", "high", True, True),
        ("gh pr create", "high", True, True),
        ("cargo publish", "high", True, True),
        ("kubectl apply -f x.yaml", "high", True, True),
        ("terraform apply", "high", True, True),
        ("python3 -c 'import socket'", "high", True, False),
        ("node -e \"require('http').get('x')\"", "high", True, False),
        ("sudo ls", "high", False, False),
        ("chown me f", "high", False, False),
        ("chmod u+s f", "high", False, False),
        ("chmod 2755 f", "high", False, False),
        ("chmod +x f", "low", False, False),
        ("crontab -l", "high", False, False),
        ("systemctl restart x", "high", False, False),
        ("kill -9 123", "high", False, False),
        ("kill %1", "low", False, False),
        ("mount /dev/sdb /mnt", "high", False, False),
        ("iptables -F", "high", False, False),
        ("printenv", "high", False, False),
        ("env", "high", False, False),
        ("env FOO=1 make", "low", False, False),
        ("bash script.sh", "low", False, False),
        ("git lfs pull", "high", True, False),
        ("git archive HEAD -o out.tar", "low", False, False),
        ("git archive --remote=x HEAD", "high", True, False),
        ("go run github.com/x/y@latest", "high", True, False),
        ("deno run --allow-net x.ts", "high", True, False),
        ("make install", "high", False, False),
        ("vim -c ':!id' f", "high", False, False),
        ("tar --to-command=sh -xf a.tar", "high", False, False),
        ("python setup.py sdist upload", "high", True, True),
        ("python3 -m http.server", "high", True, False),
        ("ruby -rsocket -e 1", "high", True, False),
        ("gh pr view 1", "high", True, False),
        ("gh issue list", "high", True, False),
        ("gh pr merge 3", "high", True, True),
        ("gh api repos/x/y", "high", True, False),
        ("gh api -X POST repos/x/y/issues -f title=x", "high", True, True),
    ],
)
def test_risk_table(text: str, risk: str, egress: bool, side_effect: bool) -> None:
    assert _risk(text) == (risk, egress, side_effect)


@pytest.mark.parametrize(
    ("text", "side_effect", "egress"),
    [
        ("git push origin main", True, True),
        ("git fetch", False, True),
        ("ls && npm publish", True, True),
        ("ls", False, False),
    ],
)
def test_decision_carries_side_effect_and_egress(
    tmp_path: Path, text: str, side_effect: bool, egress: bool
) -> None:
    decision = PermissionEngine(PermissionConfig(workspace=tmp_path)).evaluate(
        Action(kind="command", target=text)
    )
    assert (decision.side_effect, decision.egress) == (side_effect, egress)


@pytest.mark.parametrize(
    ("name", "risk", "side_effect"),
    [
        ("mcp__github__create_pull_request", "high", True),
        ("mcp__slack__send_message", "high", True),
        ("mcp__github__delete_repository", "high", True),
        ("mcp__github__get_issue", "medium", False),
    ],
)
def test_tools_are_tiered_by_effect(tmp_path: Path, name: str, risk: str, side_effect: bool) -> None:
    decision = PermissionEngine(PermissionConfig(workspace=tmp_path)).evaluate(
        Action(kind="tool", target=name)
    )
    assert (decision.verdict, decision.risk, decision.side_effect) == ("ask", risk, side_effect)
