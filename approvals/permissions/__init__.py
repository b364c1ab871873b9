"""The permission engine: judge an action (command, read, write, fetch) as allow, ask or deny.

Pure: no I/O beyond resolving paths, no clock, no database. It never imports the approval lifecycle.
"""

from approvals.permissions.actions import ACTION_KINDS, Action, ActionKind, action_digest
from approvals.permissions.decisions import RISK_ORDER, VERDICT_ORDER, Decision, Layer, Risk, Verdict
from approvals.permissions.engine import PermissionConfig, PermissionEngine
from approvals.permissions.errors import PermissionConfigError, PermissionsError, RuleError
from approvals.permissions.policy import POLICY_NAMES, PolicyName, check_policy
from approvals.permissions.rules import EMPTY_RULES, Rule, RuleSet, load_rules, load_rules_file

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
