"""Rules: syntax, load-time errors, word boundaries, path anchors, domains, deny > ask > allow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from approvals.permissions import PermissionsError, RuleError
from approvals.permissions.engine import PermissionConfig, PermissionEngine
from approvals.permissions.model.actions import Action
from approvals.permissions.policy.rules import load_rules, load_rules_file, parse_rule

HOME = Path("/home/tester")


def _engine(tmp_path: Path, rules: dict[str, Any], policy: str = "human") -> PermissionEngine:
    config = PermissionConfig(workspace=tmp_path, home=HOME, rules=load_rules(rules), policy=policy)  # type: ignore[arg-type]
    return PermissionEngine(config)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"allow": ["command(ls *"]}, r"expected action\(pattern\)"),
        ({"allow": ["Command(ls)"]}, "unknown action"),
        ({"deny": ["shell(rm *)"]}, "unknown action"),
        ({"deny": ["command()"]}, "empty pattern"),
        ({"deny": [""]}, "non-empty"),
        ({"deny": [42]}, "string or a mapping"),
        ({"alow": ["command(ls)"]}, "unknown rule list"),
        ({"allow": "command(ls)"}, "must be a list"),
        ({"allow": [{"rule": "command(ls *)", "match": ["lsof"]}]}, "should match"),
        ({"allow": [{"rule": "command(ls *)", "not_match": ["ls -la"]}]}, "should not match"),
        ({"allow": [{"rule": "command(ls *)", "extra": 1}]}, "unknown key"),
        ({"allow": [{"match": ["ls"]}]}, "'rule' key"),
        ({"allow": ["fetch(domain:)"]}, "host pattern"),
        ({"rules": ["command(ls)"]}, "mapping"),
    ],
)
def test_malformed_rules_fail_at_load(data: dict[str, Any], message: str) -> None:
    with pytest.raises(RuleError, match=message) as info:
        load_rules(data)
    assert isinstance(info.value, PermissionsError)


def test_examples_are_checked_at_load() -> None:
    rules = load_rules(
        {
            "allow": [
                {"rule": "command(ls *)", "match": ["ls", "ls -la", "ls && ls"], "not_match": ["lsof"]},
                {"rule": "write(src/**)", "match": ["src/a.py", "src/x/y.py"], "not_match": ["lib/a.py"]},
                {"rule": "fetch(domain:*.github.com)", "match": ["https://api.github.com/x"],
                 "not_match": ["https://github.com.evil.example/", "https://evilgithub.com"]},
            ]
        }
    )  # fmt: skip
    assert len(rules.allow) == 3


@pytest.mark.parametrize(
    ("pattern", "command", "matches"),
    [
        ("ls *", "ls", True),
        ("ls *", "ls -la", True),
        ("ls *", "lsof", False),
        ("ls*", "lsof", True),
        ("git push *", "git push origin main", True),
        ("git push *", "git pushy", False),
        ("git * push*", "git -C x push", True),
        ("npm run:*", "npm run build", True),
        ("git status", "git status -s", False),
        ("* --version", "python --version", True),
        ("/usr/bin/git status", "git status", True),
    ],
)
def test_command_patterns(pattern: str, command: str, matches: bool) -> None:
    assert parse_rule(f"command({pattern})", "allow").matches_command(command) is matches


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("src/**", "/ws/src/a/b.py", True),
        ("src/**", "/ws/lib/a.py", False),
        ("src/*.py", "/ws/src/a.py", True),
        ("src/*.py", "/ws/src/x/a.py", False),
        ("**/*.py", "/ws/deep/x/a.py", True),
        (".env", "/ws/app/.env", True),
        ("/etc/**", "/etc/hosts", True),
        ("//etc/**", "/etc/hosts", True),
        ("/etc/pass", "/etc/passwd", False),
        ("~/.ssh/**", "/home/tester/.ssh/id_rsa", True),
        ("~/.ssh", "/home/tester/.ssh/id_rsa", True),
        ("./out/*", "/ws/out/x", True),
    ],
)
def test_path_patterns(pattern: str, path: str, matches: bool) -> None:
    rule = parse_rule(f"read({pattern})", "deny")
    assert rule.matches_path(path, workspace="/ws", home=str(HOME)) is matches


@pytest.mark.parametrize(
    ("pattern", "url", "matches"),
    [
        ("domain:*.github.com", "https://api.github.com/x", True),
        ("domain:*.github.com", "https://github.com/x", False),
        ("domain:*.github.com", "https://api.github.com.evil.example/", False),
        ("domain:github.com", "https://GitHub.com/x", True),
        ("domain:example.*", "https://example.evil.com/", False),
        ("domain:example.*", "https://example.org/", True),
        ("https://pypi.org/*", "https://pypi.org/simple/x", True),
    ],
)
def test_domain_patterns(pattern: str, url: str, matches: bool) -> None:
    assert parse_rule(f"fetch({pattern})", "allow").matches_url(url) is matches


def test_deny_beats_ask_beats_allow_whatever_the_order(tmp_path: Path) -> None:
    rules = {
        "allow": ["command(git *)"],
        "ask": ["command(git push *)"],
        "deny": ["command(git push --force*)"],
    }
    engine = _engine(tmp_path, rules)
    assert engine.evaluate(Action(kind="command", target="git log")).verdict == "allow"
    ask = engine.evaluate(Action(kind="command", target="git push origin main"))
    assert (ask.verdict, ask.layer, ask.rule) == ("ask", "rule", "command(git push *)")
    deny = engine.evaluate(Action(kind="command", target="git push --force origin main"))
    assert (deny.verdict, deny.layer, deny.rule) == ("deny", "rule", "command(git push --force*)")


def test_compound_is_allowed_only_if_every_part_is(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"allow": ["command(npm run *)"], "deny": ["command(rm *)"]})
    assert engine.evaluate(Action(kind="command", target="npm run build && npm run test")).verdict == "allow"
    assert engine.evaluate(Action(kind="command", target="npm run build && curl x")).verdict == "ask"
    assert engine.evaluate(Action(kind="command", target="npm run build; rm a")).verdict == "deny"


def test_deny_rules_see_through_wrappers_options_and_assignments(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"deny": ["command(git push *)"]})
    for text in ("GIT_X=1 git push", "timeout 5 git push", "git -C . push", "/usr/bin/git --no-pager push"):
        assert engine.evaluate(Action(kind="command", target=text)).verdict == "deny", text


def test_allow_rules_never_widen_the_floor_secrets_or_boundaries(tmp_path: Path) -> None:
    rules = {"allow": ["command(*)", "read(**)", "write(~/**)"]}
    engine = _engine(tmp_path, rules, policy="allow-all")
    assert engine.evaluate(Action(kind="command", target="rm -rf /")).layer == "floor"
    secret = engine.evaluate(Action(kind="read", target="~/.ssh/id_rsa"))
    assert (secret.verdict, secret.resolved) == ("ask", "deny")
    assert engine.evaluate(Action(kind="command", target="cat ~/.aws/credentials")).resolved == "deny"
    # Overwriting a system file is the floor's now (engine v2), not a boundary ask.
    assert engine.evaluate(Action(kind="command", target="cp x /etc/hosts")).layer == "floor"


def test_path_allow_rule_opens_an_outside_directory(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"allow": ["write(/srv/out/**)"]})
    assert engine.evaluate(Action(kind="write", target="/srv/out/a.txt")).verdict == "allow"
    assert engine.evaluate(Action(kind="command", target="cp a.txt /srv/out/")).verdict == "allow"
    assert engine.evaluate(Action(kind="write", target="/srv/other/a.txt")).verdict == "ask"


def test_read_deny_also_denies_writes(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"deny": ["read(secrets/**)"]})
    assert engine.evaluate(Action(kind="write", target="secrets/x")).verdict == "deny"
    assert engine.evaluate(Action(kind="command", target="{ cat secrets/x; }")).verdict == "deny"


def test_wildcard_allow_does_not_approve_inline_interpreter_code(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"allow": ["command(python *)", "command(python -c 'print(1)')"]})
    assert engine.evaluate(Action(kind="command", target="python script.py")).verdict == "allow"
    assert (
        engine.evaluate(Action(kind="command", target="python -c 'import os; os.system(\"x\")'")).verdict
        == "ask"
    )
    assert engine.evaluate(Action(kind="command", target="python -c 'print(1)'")).verdict == "allow"


@pytest.mark.parametrize(
    "data",
    [
        {"allow": ["command(ls *)"], "deny": ["command(rm *)"]},
        {"rules": {"allow": ["command(ls *)"], "deny": ["command(rm *)"]}},
        {
            "permissions": {
                "policy": "human",
                "rules": {"allow": ["command(ls *)"], "deny": ["command(rm *)"]},
            }
        },
    ],
)
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_rules_files_in_every_shape(tmp_path: Path, data: dict[str, Any], suffix: str) -> None:
    path = tmp_path / f"rules{suffix}"
    path.write_text(json.dumps(data))  # JSON is also YAML
    rules = load_rules_file(path)
    assert [r.text for r in rules.allow] == ["command(ls *)"]
    assert [r.text for r in rules.deny] == ["command(rm *)"]


def test_rules_file_errors(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match="cannot read"):
        load_rules_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("allow: [command(ls *)\n")
    with pytest.raises(RuleError, match="not valid"):
        load_rules_file(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just text\n")
    with pytest.raises(RuleError, match="mapping"):
        load_rules_file(scalar)


def test_deny_and_ask_rules_also_see_the_whole_command(tmp_path: Path) -> None:
    engine = _engine(
        tmp_path, {"allow": ["command(*)"], "deny": ["command(* | sh)"], "ask": ["command(* && *)"]}
    )
    assert engine.evaluate(Action(kind="command", target="cat x | sh")).verdict == "deny"
    assert engine.evaluate(Action(kind="command", target="ls && pwd")).verdict == "ask"
    assert engine.evaluate(Action(kind="command", target="ls; pwd")).verdict == "allow"
