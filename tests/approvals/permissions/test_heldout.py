"""The red team's held-out catalogue (catalogue/heldout.yaml): written black-box, against the spec alone.

It was kept from the engine's authors while they worked and measured after each round; it now guards
against regressions like every other catalogue. Sections: `floor` (denied by the floor under `human`
and under `allow-all` with `command(*)`, `write(**)`, `read(**)`), `not_allow`, `rule_scoped` and
`fetch` (never allowed, with the case's rules), `benign` (allowed), `controls` (each rule set grants
something, so the rule cases cannot pass vacuously) and `pathological` (oversized, deeply nested or
invalid text: a decision, never an exception).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from approvals.permissions import Action, Decision, PermissionConfig, PermissionEngine, PolicyName, load_rules

CATALOGUE: dict[str, list[dict[str, Any]]] = yaml.safe_load(
    (Path(__file__).parent / "catalogue" / "heldout.yaml").read_text()
)
ALLOW_ALL_RULES = {"allow": ["command(*)", "write(**)", "read(**)"]}
HOME = Path("/home/tester")


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    """Two levels below `/`, as the red team's was: `../../usr` from it is `/usr`."""
    with tempfile.TemporaryDirectory(prefix="heldout-ws-", dir="/tmp") as path:
        yield Path(path)


@functools.cache
def _engine(workspace: Path, policy: PolicyName, rules: str | None) -> PermissionEngine:
    loaded = load_rules(json.loads(rules) if rules is not None else None)
    return PermissionEngine(PermissionConfig(workspace=workspace, home=HOME, policy=policy, rules=loaded))


def _decide(
    workspace: Path, target: str, *, kind: str = "command", policy: PolicyName = "human", rules: Any = None
) -> Decision:
    key = json.dumps(rules, sort_keys=True) if rules is not None else None
    return _engine(workspace, policy, key).evaluate(Action(kind=kind, target=target))  # type: ignore[arg-type]


def _ids(section: str) -> list[str]:
    return [f"{c['class']}: {c['target'][:60]}" for c in CATALOGUE[section]]


def test_the_catalogue_is_large_and_covers_every_principle() -> None:
    unsafe = sum(len(CATALOGUE[s]) for s in ("floor", "not_allow", "rule_scoped", "fetch"))
    assert unsafe >= 900
    assert len(CATALOGUE["benign"]) >= 300
    sections = ("floor", "not_allow", "rule_scoped", "fetch", "pathological")
    principles = {c["class"].split()[0] for s in sections for c in CATALOGUE[s]}
    assert {str(n) for n in range(1, 10)} <= principles


@pytest.mark.parametrize("case", CATALOGUE["floor"], ids=_ids("floor"))
@pytest.mark.parametrize("policy", ["human", "allow-all"])
def test_floor(workspace: Path, case: dict[str, Any], policy: PolicyName) -> None:
    rules = ALLOW_ALL_RULES if policy == "allow-all" else None
    decision = _decide(workspace, case["target"], policy=policy, rules=rules)
    assert (decision.verdict, decision.layer) == ("deny", "floor"), decision


@pytest.mark.parametrize("case", CATALOGUE["not_allow"], ids=_ids("not_allow"))
def test_never_allowed(workspace: Path, case: dict[str, Any]) -> None:
    decision = _decide(workspace, case["target"])
    assert decision.verdict != "allow", decision


@pytest.mark.parametrize("case", CATALOGUE["rule_scoped"], ids=_ids("rule_scoped"))
def test_command_rules_do_not_widen(workspace: Path, case: dict[str, Any]) -> None:
    decision = _decide(workspace, case["target"], kind=case.get("action", "command"), rules=case["rules"])
    assert decision.verdict != "allow", decision


@pytest.mark.parametrize("case", CATALOGUE["fetch"], ids=_ids("fetch"))
def test_fetch_rules_do_not_widen(workspace: Path, case: dict[str, Any]) -> None:
    decision = _decide(workspace, case["target"], kind="fetch", rules=case["rules"])
    assert decision.verdict != "allow", decision


@pytest.mark.parametrize("case", CATALOGUE["controls"], ids=_ids("controls"))
def test_each_rule_set_grants_something(workspace: Path, case: dict[str, Any]) -> None:
    decision = _decide(workspace, case["target"], kind=case.get("action", "command"), rules=case["rules"])
    assert decision.verdict == "allow", decision


@pytest.mark.parametrize("case", CATALOGUE["benign"], ids=_ids("benign"))
def test_ordinary_work_never_asks(workspace: Path, case: dict[str, Any]) -> None:
    decision = _decide(workspace, case["target"])
    assert decision.verdict == "allow", decision


@pytest.mark.parametrize(
    "case",
    [c for c in CATALOGUE["pathological"] if "expr" in c],
    ids=lambda c: f"{c['class']}: {c['expr'][:50]}",
)
def test_pathological_text_gets_a_decision(workspace: Path, case: dict[str, Any]) -> None:
    target = eval(case["expr"], {"__builtins__": {"range": range, "str": str, "chr": chr}})
    decision = _decide(workspace, target)
    if case["expect"] == "deny":
        # Past a bound (size, structure, time) the engine asks a human, flagged so no policy allows it.
        assert decision.verdict == "deny" or "fails closed: ask" in decision.reason, decision
        assert decision.verdict != "allow", decision
    elif case["expect"] == "not_allow":
        assert decision.verdict != "allow", decision


def test_invalid_bytes_through_the_cli_are_never_allowed(tmp_path: Path) -> None:
    """Raw bytes (invalid UTF-8, wrong JSON types) reach the engine only through `permissions check`."""
    cases = [c for c in CATALOGUE["pathological"] if "bytes_expr" in c]
    payload = b"\n".join(eval(c["bytes_expr"], {"__builtins__": {}}) for c in cases) + b"\n"
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "permissions", "check", "--jsonl", "--workspace", str(tmp_path)],
        input=payload,
        capture_output=True,
        timeout=120,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    assert "Traceback" not in done.stderr.decode()
    assert len(lines) == len(cases)
    assert all(line.get("decision") != "allow" for line in lines), lines
