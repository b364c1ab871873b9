"""The engine's front doors: a sorted `__all__` that is exactly its public API."""

from __future__ import annotations

import pytest

from tests.doors import assert_door

DOORS = {
    "approvals.permissions": [
        "ACTION_KINDS",
        "EMPTY_RULES",
        "POLICY_NAMES",
        "RISK_ORDER",
        "VERDICT_ORDER",
        "Action",
        "ActionKind",
        "Decision",
        "Layer",
        "PermissionConfig",
        "PermissionConfigError",
        "PermissionEngine",
        "PermissionsError",
        "PolicyName",
        "Risk",
        "Rule",
        "RuleError",
        "RuleSet",
        "Verdict",
        "action_digest",
        "check_policy",
        "load_rules",
        "load_rules_file",
    ],
    "approvals.permissions.shell": [
        "MAX_SHELL_CHARS",
        "UNKNOWN",
        "Expansion",
        "Invocation",
        "Script",
        "SimpleCommand",
        "Word",
        "expand",
        "expand_script",
        "parse_shell",
    ],
}


@pytest.mark.parametrize("module", sorted(DOORS))
def test_front_door_exports_exactly_its_api(module: str) -> None:
    assert_door(module, DOORS[module])
