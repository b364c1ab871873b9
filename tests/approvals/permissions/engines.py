"""One engine per (workspace, policy, rule set) for the table tests: engines are immutable, so cached."""

from __future__ import annotations

import functools
from pathlib import Path

from approvals.permissions import PermissionConfig, PermissionEngine, PolicyName, load_rules

HOME = Path("/home/tester")
# The broadest allow rules there are: whatever still denies under them is the floor's.
ALLOW_EVERYTHING = {"allow": ["command(*)", "read(**)", "write(**)", "fetch(*)"]}
# Table tests judge the class of a case, not its time: on a loaded shared machine the default CPU
# deadline could fail a case closed, so these engines get ten seconds (the bench measures time).
TABLE_BUDGET_SECONDS = 10.0


@functools.cache
def engine(workspace: Path, policy: PolicyName, everything: bool) -> PermissionEngine:
    """The engine for `policy`, with `ALLOW_EVERYTHING` when `everything`."""
    rules = load_rules(ALLOW_EVERYTHING if everything else None)
    return PermissionEngine(
        PermissionConfig(
            workspace=workspace, home=HOME, policy=policy, rules=rules, budget_seconds=TABLE_BUDGET_SECONDS
        )
    )


@functools.cache
def table_engine(workspace: Path, policy: PolicyName = "human") -> PermissionEngine:
    """The engine for `policy` with no rules and the table tests' generous deadline."""
    return PermissionEngine(
        PermissionConfig(workspace=workspace, home=HOME, policy=policy, budget_seconds=TABLE_BUDGET_SECONDS)
    )
