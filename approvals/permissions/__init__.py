"""The permission engine: judge an action (command, read, write, fetch) as allow, ask or deny.

Pure: no I/O beyond resolving paths, no clock, no database. It never imports the approval lifecycle.
The value types load eagerly; the engine (the shell grammar, the program tables) loads on first use,
so the approval lifecycle, which only names actions and decisions, does not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from approvals.permissions.model import (
    ACTION_KINDS,
    RISK_ORDER,
    VERDICT_ORDER,
    Action,
    ActionKind,
    Decision,
    Layer,
    PermissionConfigError,
    PermissionsError,
    Risk,
    RuleError,
    Verdict,
    action_digest,
)
from approvals.permissions.policy import (
    EMPTY_RULES,
    POLICY_NAMES,
    PolicyName,
    Rule,
    RuleSet,
    check_policy,
    load_rules,
    load_rules_file,
)

if TYPE_CHECKING:
    from approvals.permissions.engine import PermissionConfig, PermissionEngine

# name -> module, imported on first access (PEP 562).
_LAZY = {
    "PermissionConfig": "approvals.permissions.engine",
    "PermissionEngine": "approvals.permissions.engine",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'approvals.permissions' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
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
]
