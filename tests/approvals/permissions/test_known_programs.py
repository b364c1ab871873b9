"""Principle 1: a command is allowed unasked only when every program and subcommand is known.

catalogue/v2_known.yaml holds unknown subcommands and publish verbs hidden behind global options;
catalogue/v2_benign.yaml is ordinary work across ecosystems, which must never ask.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, Decision, PermissionConfig, PermissionEngine, PolicyName

_DIR = Path(__file__).parent / "catalogue"
KNOWN: dict[str, list[str]] = yaml.safe_load((_DIR / "v2_known.yaml").read_text())
BENIGN: dict[str, list[str]] = yaml.safe_load((_DIR / "v2_benign.yaml").read_text())
_BENIGN_ITEMS = [(group, item) for group, items in BENIGN.items() for item in items]

# What is judged here is the class, not the time: a loaded shared machine must not fail closed.
_BUDGET = 10.0


@functools.cache
def _engine(workspace: Path, policy: PolicyName = "human") -> PermissionEngine:
    return PermissionEngine(
        PermissionConfig(
            workspace=workspace, home=Path("/home/tester"), policy=policy, budget_seconds=_BUDGET
        )
    )


def _decide(workspace: Path, command: str, policy: PolicyName = "human") -> Decision:
    return _engine(workspace, policy).evaluate(Action(kind="command", target=command))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ws")
    (root / "build").mkdir()
    return root


def test_catalogues_are_large_and_strings() -> None:
    items: list[Any] = [i for v in KNOWN.values() for i in v] + [i for _, i in _BENIGN_ITEMS]
    assert all(isinstance(i, str) for i in items)  # a stray `: ` would make a mapping
    assert len(KNOWN["unknown"]) >= 60
    assert len(_BENIGN_ITEMS) >= 400
    assert len({i for _, i in _BENIGN_ITEMS}) == len(_BENIGN_ITEMS)


@pytest.mark.parametrize("command", KNOWN["unknown"])
def test_unknown_subcommands_and_programs_ask(workspace: Path, command: str) -> None:
    decision = _decide(workspace, command)
    assert decision.verdict == "ask", decision


@pytest.mark.parametrize("command", KNOWN["publish"])
def test_publish_past_global_options_asks_high(workspace: Path, command: str) -> None:
    decision = _decide(workspace, command)
    assert (decision.verdict, decision.risk) == ("ask", "high"), decision
    assert _decide(workspace, command, "risk-based").resolved == "deny"


@pytest.mark.parametrize(("group", "command"), _BENIGN_ITEMS, ids=[i[:60] for _, i in _BENIGN_ITEMS])
def test_ordinary_work_is_allowed(workspace: Path, group: str, command: str) -> None:
    decision = _decide(workspace, command)
    assert decision.verdict == "allow", (group, decision)


def test_unknown_subcommand_reason_names_it(workspace: Path) -> None:
    assert _decide(workspace, "mvn deploy:deploy-file").reason == "unknown subcommand: mvn deploy:deploy-file"
    assert _decide(workspace, "npm token list").reason == "unknown subcommand: npm token"


_PROGRAMS = ["npm", "cargo", "mvn", "gradle", "go", "pip", "tox", "pre-commit", "coverage", "ruff"]
_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=3, max_size=12).filter(
    lambda s: not s.startswith("-")
)


@settings(max_examples=150, deadline=None)
@given(program=st.sampled_from(_PROGRAMS), verb=_NAME)
def test_a_subcommand_outside_the_table_never_allows(program: str, verb: str) -> None:
    """Generated verbs: allowed only when the table lists them (or the program treats it as a script)."""
    from approvals.permissions.shell.known import TOOLS

    tool = TOOLS[program]
    decision = _decide(Path("/tmp/never-used-ws"), f"{program} {verb}")
    if verb not in tool.subs and not tool.scripts:
        assert decision.verdict != "allow", decision


_GLOBAL = {
    "npm": ["--prefix x", "-w pkg", "--loglevel silent"],
    "cargo": ["+nightly", "-Z x", "--color always"],
    "mvn": ["-B", "-q", "-T 4", "-pl core", "-Dx=y"],
    "git": ["-C .", "--no-pager", "--git-dir=.git"],
}
_VERB = {"npm": "publish", "cargo": "publish", "mvn": "deploy", "git": "push"}


@settings(max_examples=120, deadline=None)
@given(program=st.sampled_from(sorted(_GLOBAL)), data=st.data())
def test_global_options_in_any_order_never_hide_the_verb(program: str, data: st.DataObject) -> None:
    options = data.draw(st.lists(st.sampled_from(_GLOBAL[program]), max_size=4))
    command = " ".join([program, *options, _VERB[program]])
    decision = _decide(Path("/tmp/never-used-ws"), command)
    assert (decision.verdict, decision.risk) == ("ask", "high"), (command, decision)


_SPELLINGS = {
    "mvn": ["mvn", "/usr/bin/mvn", "./mvnw", "mvnw", "/opt/maven/bin/mvn"],
    "gradle": ["gradle", "./gradlew", "gradlew", "/usr/local/bin/gradle"],
    "npm": ["npm", "/usr/bin/npm", "command npm", "env npm", "nice npm"],
    "python -m": ["python -m", "python3 -m", "python3.12 -m", "/usr/bin/python3 -m", "uv run python -m"],
}
_UNKNOWN_VERB = {"mvn": "deploy:deploy-file", "gradle": "publishToMavenLocal", "npm": "token list",
                 "python -m": "twine upload dist/x"}  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(family=st.sampled_from(sorted(_SPELLINGS)), data=st.data())
def test_every_spelling_of_a_program_keeps_its_table(family: str, data: st.DataObject) -> None:
    """`./mvnw`, `/usr/bin/mvn`, `python3.12 -m`: the same program, the same subcommand table."""
    spelling = data.draw(st.sampled_from(_SPELLINGS[family]))
    command = f"{spelling} {_UNKNOWN_VERB[family]}"
    assert _decide(Path("/tmp/never-used-ws"), command).verdict != "allow", command
