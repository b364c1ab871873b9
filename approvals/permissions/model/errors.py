"""Exceptions of the permission engine: one root, raised only while building an engine or loading rules."""

from __future__ import annotations


class PermissionsError(Exception):
    """Root of every error raised by `approvals.permissions` (judging an action never raises)."""


class RuleError(PermissionsError):
    """A permission rule (or rules file) is malformed; raised at load time, never silently dropped."""

    def __init__(self, why: str, rule: str | None = None) -> None:
        super().__init__(f"rule {rule!r}: {why}" if rule is not None else why)
        self.rule = rule
        self.why = why


class PermissionConfigError(PermissionsError):
    """The permission engine cannot be built as configured (e.g. a workspace of `/` or a system directory)."""
