"""The values every part of the engine speaks: actions, decisions, findings, URLs and errors.

No judging here and no grammar: the approval lifecycle loads this room (through the engine's door)
without paying for the shell parser or the program tables.
"""

from __future__ import annotations

from approvals.permissions.model.actions import ACTION_KINDS, Action, ActionKind, action_digest
from approvals.permissions.model.decisions import RISK_ORDER, VERDICT_ORDER, Decision, Layer, Risk, Verdict
from approvals.permissions.model.errors import PermissionConfigError, PermissionsError, RuleError
from approvals.permissions.model.findings import Finding, worst
from approvals.permissions.model.riskinfo import RiskInfo
from approvals.permissions.model.urls import DEFAULT_PORTS, DENIED_SCHEMES, URL, normalise

__all__ = [
    "ACTION_KINDS",
    "DEFAULT_PORTS",
    "DENIED_SCHEMES",
    "RISK_ORDER",
    "URL",
    "VERDICT_ORDER",
    "Action",
    "ActionKind",
    "Decision",
    "Finding",
    "Layer",
    "PermissionConfigError",
    "PermissionsError",
    "Risk",
    "RiskInfo",
    "RuleError",
    "Verdict",
    "action_digest",
    "normalise",
    "worst",
]
