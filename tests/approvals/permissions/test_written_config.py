"""Principle 2: a file written and then run or read as configuration in one command is judged by its text."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, Decision, PermissionEngine, PolicyName
from tests.approvals.permissions.engines import table_engine

CASES: dict[str, list[str]] = yaml.safe_load(
    (Path(__file__).parent / "catalogue" / "v2_written.yaml").read_text()
)
_WS = Path("/tmp/never-used-written-ws")


def _engine(policy: PolicyName = "human") -> PermissionEngine:
    return table_engine(_WS, policy)


def _decide(command: str, policy: PolicyName = "human") -> Decision:
    return _engine(policy).evaluate(Action(kind="command", target=command))


def test_catalogue_is_large_and_strings() -> None:
    assert sum(len(v) for v in CASES.values()) >= 60
    assert all(isinstance(c, str) for v in CASES.values() for c in v)


@pytest.mark.parametrize("command", CASES["floor"], ids=[c[:60] for c in CASES["floor"]])
def test_written_text_that_destroys_reaches_the_floor(command: str) -> None:
    for policy in ("human", "allow-all"):
        decision = _decide(command, policy)
        assert (decision.resolved, decision.layer) == ("deny", "floor"), decision


@pytest.mark.parametrize("command", CASES["ask"], ids=[c[:60] for c in CASES["ask"]])
def test_written_text_that_runs_or_reaches_out_asks(command: str) -> None:
    assert _decide(command).verdict != "allow", _decide(command)


@pytest.mark.parametrize("command", CASES["allow"], ids=[c[:60] for c in CASES["allow"]])
def test_harmless_written_text_is_allowed(command: str) -> None:
    assert _decide(command).verdict == "allow", _decide(command)


_DANGER = st.sampled_from(["rm -rf /", "rm -rf ~", "rm -rf /usr/lib", "rm -fr $HOME"])


@settings(max_examples=100, deadline=None)
@given(
    danger=_DANGER,
    writer=st.sampled_from(["printf '%s\\n' {t} > {f}", "echo {t} > {f}", "printf {t} >> {f}"]),
    runner=st.sampled_from(["sh {f}", "bash {f}", "source {f}", ". ./{f}", "./{f}"]),
    joiner=st.sampled_from([" && ", "; ", "\n"]),
    name=st.sampled_from(["x.sh", "run", "scripts/go.sh", ".hidden.sh"]),
)
def test_any_write_then_run_of_a_destructive_script_is_floored(
    danger: str, writer: str, runner: str, joiner: str, name: str
) -> None:
    quoted = "'" + danger + "'"
    command = writer.format(t=quoted, f=name) + joiner + runner.format(f=name)
    assert _decide(command, "allow-all").resolved == "deny", command
