"""Known bypasses of other engines (catalogue/bypasses.yaml) must stay blocked in ours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from approvals.permissions.engine import PermissionConfig, PermissionEngine
from approvals.permissions.model.actions import Action
from approvals.permissions.policy.policies import PolicyName
from approvals.permissions.policy.rules import load_rules

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "catalogue" / "bypasses.yaml").read_text()
)


def _evaluate(workspace: Path, case: dict[str, Any], policy: PolicyName) -> Any:
    config = PermissionConfig(
        workspace=workspace, home=Path("/home/tester"), policy=policy, rules=load_rules(case.get("rules"))
    )
    return PermissionEngine(config).evaluate(Action(kind=case.get("kind", "command"), target=case["target"]))


def test_catalogue_cites_its_sources() -> None:
    assert len(CASES) >= 50
    assert all(case["source"] and case["expect"] in ("floor", "blocked", "ask", "allow") for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["source"][:70] for c in CASES])
def test_bypass_stays_blocked(tmp_path: Path, case: dict[str, Any]) -> None:
    human = _evaluate(tmp_path, case, "human")
    automated = _evaluate(tmp_path, case, "risk-based")
    permissive = _evaluate(tmp_path, case, "allow-all")
    expect = case["expect"]
    if expect == "floor":
        assert (human.verdict, human.layer, permissive.resolved) == ("deny", "floor", "deny"), human
    elif expect == "blocked":
        assert human.verdict != "allow", human
        assert automated.resolved != "allow", automated
    elif expect == "ask":
        assert human.verdict == "ask", human
    else:
        assert human.verdict == "allow", human
