"""Principle 5: secrets by content (catalogue/v2_secrets.yaml): asked, never resolved by automation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, Decision, PermissionEngine, PolicyName
from tests.approvals.permissions.engines import table_engine

CASES: dict[str, list[str]] = yaml.safe_load(
    (Path(__file__).parent / "catalogue" / "v2_secrets.yaml").read_text()
)
_WS = Path("/tmp/never-used-secrets-ws")


def _engine(policy: PolicyName) -> PermissionEngine:
    return table_engine(_WS, policy)


def _decide(command: str, policy: PolicyName = "human") -> Decision:
    return _engine(policy).evaluate(Action(kind="command", target=command))


def test_catalogue_is_large_and_strings() -> None:
    assert len(CASES["secret"]) >= 100
    assert all(isinstance(c, str) for v in CASES.values() for c in v)


@pytest.mark.parametrize("command", CASES["secret"], ids=[c[:60] for c in CASES["secret"]])
def test_secret_reads_ask_and_automation_never_allows(command: str) -> None:
    assert _decide(command).verdict == "ask", _decide(command)
    for policy in ("risk-based", "allow-all"):
        assert _decide(command, policy).resolved == "deny", (policy, _decide(command, policy))


@pytest.mark.parametrize("command", CASES["allowed"])
def test_templates_and_filtered_listings_are_allowed(command: str) -> None:
    assert _decide(command).verdict == "allow", _decide(command)


def _case_variants(name: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(name), max_size=len(name)).map(
        lambda flips: "".join(c.upper() if f else c for c, f in zip(name, flips, strict=True))
    )


@settings(max_examples=150, deadline=None)
@given(
    base=st.sampled_from(
        [".env", ".env.local", ".envrc", "id_rsa", "server.pem", "credentials.json"]
    ).flatmap(_case_variants),
    reader=st.sampled_from(["cat", "head -n1", "less", "base64", "xxd", "cp {} /tmp/x", "grep x"]),
    where=st.sampled_from(["", "./", "sub/", "sub/../", "$PWD/"]),
)
def test_every_spelling_of_a_secret_file_asks(base: str, reader: str, where: str) -> None:
    command = reader.replace("{}", where + base) if "{}" in reader else f"{reader} {where}{base}"
    assert _decide(command, "allow-all").resolved == "deny", command


@settings(max_examples=100, deadline=None)
@given(pattern=st.sampled_from([".e*", ".[e]nv", "?env", ".en?", ".env*", ".*", "[.]e*", ".e[n]v*", ".??v"]))
def test_globs_that_can_match_an_env_file_ask(pattern: str) -> None:
    assert _decide(f"cat {pattern}", "allow-all").resolved == "deny", pattern
