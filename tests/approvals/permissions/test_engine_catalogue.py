"""The action catalogue (catalogue/actions.yaml) through the engine: safety bars and ordinary-work rates."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from approvals.permissions.engine import PermissionConfig, PermissionEngine
from approvals.permissions.model.actions import Action
from approvals.permissions.model.decisions import Decision
from approvals.permissions.policy.policies import PolicyName
from approvals.permissions.policy.rules import load_rules

_DIR = Path(__file__).parent / "catalogue"
CATALOGUE: dict[str, Any] = yaml.safe_load((_DIR / "actions.yaml").read_text())
# variants.yaml: more cases found while hunting for gaps; its `adversarial` list is unsafe work.
# ordinary_more.yaml / adversarial_more.yaml: everyday work the engine used to ask about (loops,
# listings, here-docs into interpreters, project runners) and the attacks aimed at those relaxations.
_MORE = ("variants.yaml", "ordinary_more.yaml", "adversarial_more.yaml")
for _name in _MORE:
    for _category, _items_list in yaml.safe_load((_DIR / _name).read_text()).items():
        CATALOGUE.setdefault(_category, []).extend(_items_list)
HOME = Path("/home/tester")
UNSAFE = (
    "egress",
    "publish",
    "privilege",
    "secrets",
    "outside_write",
    "obfuscation",
    "chaining",
    "adversarial",
)


def _items(category: str) -> list[str]:
    return list(CATALOGUE[category])


def _action(item: str) -> Action:
    kind, _, target = item.partition(" ")
    return Action(kind=kind, target=target)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ws")


@functools.cache
def _engine(workspace: Path, policy: PolicyName, chaining: bool) -> PermissionEngine:
    """One engine per policy and rule set (engines are immutable; building ~2,000 of them is waste)."""
    rules = load_rules(CATALOGUE["chaining_rules"] if chaining else None)
    return PermissionEngine(PermissionConfig(workspace=workspace, home=HOME, policy=policy, rules=rules))


def _decide(workspace: Path, category: str, item: str, policy: PolicyName) -> Decision:
    return _engine(workspace, policy, category == "chaining").evaluate(_action(item))


def test_catalogue_is_large_enough() -> None:
    total = sum(len(v) for k, v in CATALOGUE.items() if k != "chaining_rules")
    assert total >= 300
    assert len(CATALOGUE["ordinary"]) >= 120


def test_newer_catalogues_are_large_and_new() -> None:
    """The second round adds at least 150 ordinary and 100 adversarial cases, none repeated."""
    older: set[str] = set()
    for name in ("actions.yaml", "variants.yaml"):
        for category, items in yaml.safe_load((_DIR / name).read_text()).items():
            if category != "chaining_rules":
                older.update(items)
    ordinary = yaml.safe_load((_DIR / "ordinary_more.yaml").read_text())["ordinary"]
    adversarial = yaml.safe_load((_DIR / "adversarial_more.yaml").read_text())
    unsafe = adversarial["floor"] + adversarial["adversarial"]
    assert len(ordinary) >= 150
    assert len(unsafe) >= 100
    assert all(isinstance(i, str) for i in ordinary + unsafe)  # a stray `: ` would make a mapping
    assert not (set(ordinary) | set(unsafe)) & older
    assert len(set(ordinary)) == len(ordinary)
    assert len(set(unsafe)) == len(unsafe)


@pytest.mark.parametrize("item", _items("floor"))
def test_floor_is_denied_by_the_floor(workspace: Path, item: str) -> None:
    for policy in ("human", "allow-all"):
        decision = _decide(workspace, "floor", item, policy)
        assert (decision.verdict, decision.resolved, decision.layer, decision.risk) == (
            "deny", "deny", "floor", "critical",
        ), decision  # fmt: skip


@pytest.mark.parametrize(
    ("category", "item"), [(c, i) for c in UNSAFE for i in _items(c)], ids=lambda v: str(v)[:60]
)
def test_unsafe_actions_are_never_allowed(workspace: Path, category: str, item: str) -> None:
    human = _decide(workspace, category, item, "human")
    automated = _decide(workspace, category, item, "risk-based")
    assert human.verdict != "allow", human
    assert automated.resolved != "allow", automated


@pytest.mark.parametrize("item", _items("outside_read"))
def test_outside_reads_are_asked(workspace: Path, item: str) -> None:
    decision = _decide(workspace, "outside_read", item, "human")
    assert decision.verdict == "ask", decision
    assert decision.layer == "boundary"


@pytest.mark.parametrize("item", _items("secrets"))
def test_secrets_are_never_resolved_by_automation(workspace: Path, item: str) -> None:
    for policy in ("risk-based", "allow-all", "deny-all"):
        assert _decide(workspace, "secrets", item, policy).resolved == "deny"


def test_ordinary_work_rate(workspace: Path) -> None:
    """The bar: at most one in forty ordinary actions asked or denied (we aim for none)."""
    items = _items("ordinary")
    blocked = [
        (i, d.reason) for i in items if (d := _decide(workspace, "ordinary", i, "human")).verdict != "allow"
    ]
    assert len(blocked) / len(items) <= 1 / 40, blocked
    assert blocked == []
