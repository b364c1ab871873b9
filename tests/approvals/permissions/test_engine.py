"""Engine: policies, run grants, evaluate_many, "always" offers, defaults and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.permissions import PermissionConfigError, RuleError
from approvals.permissions.engine import DEFAULT_PROTECTED, PermissionConfig, PermissionEngine
from approvals.permissions.model.actions import Action
from approvals.permissions.model.decisions import Risk, Verdict
from approvals.permissions.policy.policies import PolicyName, check_policy, resolve
from approvals.permissions.policy.rules import EMPTY_RULES, load_rules

HOME = Path("/home/tester")


def _engine(tmp_path: Path, policy: PolicyName = "human", **kwargs: object) -> PermissionEngine:
    return PermissionEngine(PermissionConfig(workspace=tmp_path, home=HOME, policy=policy, **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("verdict", "risk", "sensitive", "policy", "resolved"),
    [
        ("ask", "medium", False, "human", "ask"),
        ("ask", "high", False, "human", "ask"),
        ("ask", "low", False, "risk-based", "allow"),
        ("ask", "medium", False, "risk-based", "allow"),
        ("ask", "high", False, "risk-based", "deny"),
        ("ask", "medium", False, "deny-all", "deny"),
        ("ask", "high", False, "allow-all", "allow"),
        ("ask", "high", True, "allow-all", "deny"),
        ("ask", "medium", True, "risk-based", "deny"),
        ("ask", "high", True, "human", "ask"),
        ("deny", "low", False, "allow-all", "deny"),
        ("deny", "critical", False, "allow-all", "deny"),
        ("allow", "low", False, "deny-all", "allow"),
    ],
)
def test_policy_resolution(
    verdict: Verdict, risk: Risk, sensitive: bool, policy: PolicyName, resolved: Verdict
) -> None:
    assert resolve(verdict, risk, sensitive=sensitive, policy=policy) == resolved


def test_unknown_policy_is_an_error() -> None:
    assert check_policy("risk-based") == "risk-based"
    with pytest.raises(RuleError, match="unknown policy"):
        check_policy("yolo")


@pytest.mark.parametrize(
    ("policy", "target", "resolved"),
    [
        ("human", "curl https://x.example", "ask"),
        ("risk-based", "frobnicate", "allow"),  # unknown program: medium
        ("risk-based", "curl https://x.example", "deny"),
        ("deny-all", "frobnicate", "deny"),
        ("allow-all", "curl https://x.example", "allow"),
        ("allow-all", "cat ~/.ssh/id_rsa", "deny"),
        ("allow-all", "rm -rf /", "deny"),
        ("allow-all", "ls", "allow"),
    ],
)
def test_policies_end_to_end(tmp_path: Path, policy: PolicyName, target: str, resolved: Verdict) -> None:
    assert _engine(tmp_path, policy).evaluate(Action(kind="command", target=target)).resolved == resolved


def test_engine_without_configuration_is_on(tmp_path: Path) -> None:
    engine = PermissionEngine(PermissionConfig(workspace=tmp_path))
    assert engine.config.policy == "human"
    assert engine.config.rules == EMPTY_RULES
    assert engine.config.protected == DEFAULT_PROTECTED
    assert engine.evaluate(Action(kind="command", target="rm -rf /")).layer == "floor"
    assert engine.evaluate(Action(kind="command", target="ls")).verdict == "allow"


def test_run_grants_turn_an_ask_into_allow_but_never_floor_deny_or_secrets(tmp_path: Path) -> None:
    engine = _engine(tmp_path, rules=load_rules({"deny": ["command(npm publish*)"]}))
    actions = [
        Action(kind="command", target="curl   https://x.example"),
        Action(kind="command", target="rm -rf /"),
        Action(kind="command", target="npm publish"),
        Action(kind="read", target="~/.ssh/id_rsa"),
        Action(kind="write", target="/srv/x"),
    ]
    grants = frozenset(engine.scope_key(a) for a in actions)
    verdicts = [engine.evaluate(a, grants=grants) for a in actions]
    assert [(d.verdict, d.layer) for d in verdicts] == [
        ("allow", "policy"), ("deny", "floor"), ("deny", "rule"), ("ask", "boundary"), ("allow", "policy"),
    ]  # fmt: skip
    # The key is normalised: extra spaces do not matter, a different command does.
    assert engine.scope_key(Action(kind="command", target="curl https://x.example")) in grants
    assert (
        engine.evaluate(Action(kind="command", target="curl https://y.example"), grants=grants).verdict
        == "ask"
    )


def test_scope_key_normalises_paths(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    assert engine.scope_key(Action(kind="write", target="a/../b.txt")) == f"write({tmp_path / 'b.txt'})"
    assert engine.scope_key(Action(kind="read", target="~/x")) == f"read({HOME}/x)"


def test_evaluate_many_takes_the_most_severe(tmp_path: Path) -> None:
    engine = _engine(tmp_path, "risk-based")
    read = Action(kind="read", target="src/a.py")
    fetch = Action(kind="fetch", target="https://x.example")
    floor = Action(kind="command", target="rm -rf ~")
    one = engine.evaluate_many([read, fetch])
    assert (one.verdict, one.resolved, one.risk, one.egress) == ("ask", "deny", "high", True)
    two = engine.evaluate_many([read, floor, fetch])
    assert (two.verdict, two.layer, two.risk) == ("deny", "floor", "critical")
    assert engine.evaluate_many([read]).verdict == "allow"
    assert engine.evaluate_many([]).verdict == "ask"


@pytest.mark.parametrize(
    ("kind", "target", "offerable"),
    [
        ("command", "frobnicate --all", True),
        ("command", "ls", False),  # allowed already
        ("command", "curl https://x.example", False),  # network program
        ("command", "python3 -c 'import os'", False),  # interpreter
        ("command", "frob $X", False),  # not plain words
        ("command", "sudo ls", False),  # high risk
        ("read", "~/.ssh/id_rsa", False),  # secret
        ("read", "/etc/hosts", True),
        ("write", "/srv/*.txt", False),  # glob
        ("command", "frob " + "x" * 300, False),  # cannot be shown in full
    ],
)
def test_always_is_offered_only_for_shown_plain_narrow_actions(
    tmp_path: Path, kind: str, target: str, offerable: bool
) -> None:
    decision = _engine(tmp_path).evaluate(Action(kind=kind, target=target))  # type: ignore[arg-type]
    assert decision.always_offerable is offerable, decision


@pytest.mark.parametrize(
    ("kind", "target"),
    [("command", ""), ("command", "   "), ("read", ""), ("write", "a\x00b"), ("bogus", "x")],
)
def test_bad_input_fails_closed(tmp_path: Path, kind: str, target: str) -> None:
    decision = _engine(tmp_path).evaluate(Action(kind=kind, target=target))  # type: ignore[arg-type]
    assert decision.verdict == "deny"


@pytest.mark.parametrize(
    ("target", "verdict"),
    [
        ("https://example.com/x", "ask"),
        ("example.com/x", "ask"),
        ("file:///etc/passwd", "ask"),
        ("file:///home/tester/.ssh/id_rsa", "ask"),
        ("gopher://x", "deny"),  # engine v2: SSRF-smuggling schemes are denied, not asked
    ],
)
def test_fetch(tmp_path: Path, target: str, verdict: Verdict) -> None:
    decision = _engine(tmp_path).evaluate(Action(kind="fetch", target=target))
    assert decision.verdict == verdict


def test_fetch_rules(tmp_path: Path) -> None:
    rules = load_rules({"allow": ["fetch(domain:*.github.com)"], "deny": ["fetch(domain:evil.example)"]})
    engine = _engine(tmp_path, rules=rules)
    allowed = engine.evaluate(Action(kind="fetch", target="https://api.github.com/repos"))
    assert (allowed.verdict, allowed.rule, allowed.egress) == ("allow", "fetch(domain:*.github.com)", True)
    assert engine.evaluate(Action(kind="fetch", target="https://evil.example/")).verdict == "deny"


def test_tool_rules(tmp_path: Path) -> None:
    rules = load_rules({"allow": ["tool(mcp__docs__*)"], "deny": ["tool(mcp__github__delete_*)"]})
    engine = _engine(tmp_path, rules=rules)
    assert engine.evaluate(Action(kind="tool", target="mcp__docs__search")).verdict == "allow"
    assert engine.evaluate(Action(kind="tool", target="mcp__github__delete_repository")).verdict == "deny"


@pytest.mark.parametrize("workspace", ["/", "/etc", "/usr"])
def test_a_system_directory_is_not_a_workspace(workspace: str) -> None:
    with pytest.raises(PermissionConfigError, match="system directory"):
        PermissionEngine(PermissionConfig(workspace=Path(workspace)))


@pytest.mark.parametrize(
    "url",
    [
        "https://api.github.com@evil.example/",
        "https://evil.example\\@api.github.com/",
        "https://api.gіthub.com/",
    ],
)
def test_allow_rules_never_apply_to_ambiguous_urls(tmp_path: Path, url: str) -> None:
    engine = _engine(tmp_path, rules=load_rules({"allow": ["fetch(domain:*.github.com)", "fetch(*)"]}))
    assert engine.evaluate(Action(kind="fetch", target=url)).verdict == "ask"


@pytest.mark.parametrize(
    ("kind", "target", "verdict"),
    [
        # nesting past the cap: asked ("too complex to judge", fails closed), never allowed
        ("command", "(" * 3000 + "ls" + ")" * 3000, "ask"),
        ("command", "echo " + "$(" * 2000 + "ls" + ")" * 2000, "ask"),
        ("command", "(" * 3000 + "rm -rf /" + ")" * 3000, "ask"),
        ("fetch", "[", "ask"),
        ("fetch", "http://[::1", "ask"),
    ],
)
def test_pathological_input_fails_closed(tmp_path: Path, kind: str, target: str, verdict: Verdict) -> None:
    assert _engine(tmp_path).evaluate(Action(kind=kind, target=target)).verdict == verdict  # type: ignore[arg-type]


def test_unknown_policy_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(PermissionConfigError, match="unknown policy"):
        PermissionEngine(PermissionConfig(workspace=tmp_path, policy="yolo"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("ls; npx tsc", "deny"),  # the runner is stripped for risk, not for deny rules
        ("ls && uv run pytest", "deny"),
        ("timeout 5 ls", "deny"),
        ("poetry run pytest", "allow"),
        ("poetry run curl x.example", "ask"),  # an allow rule for the runner never approves what it runs
        ("ls", "allow"),
    ],
)
def test_deny_rules_see_runners_and_wrappers_as_written(tmp_path: Path, text: str, verdict: str) -> None:
    deny = ["command(npx *)", "command(uv *)", "command(timeout *)"]
    rules = load_rules({"deny": deny, "allow": ["command(poetry run *)"]})
    decision = _engine(tmp_path, rules=rules).evaluate(Action(kind="command", target=text))
    assert decision.verdict == verdict, decision
