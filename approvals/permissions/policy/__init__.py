"""What a team configures: its allow / ask / deny rules and what its policy does with an ask.

Loaded with the engine's door (a team's configuration is checked without the shell grammar, which
the rules load only to check a command example).
"""

from __future__ import annotations

from approvals.permissions.policy.policies import POLICY_NAMES, PolicyName, check_policy, resolve
from approvals.permissions.policy.rules import (
    BUCKETS,
    EMPTY_RULES,
    Bucket,
    Rule,
    RuleSet,
    load_rules,
    load_rules_file,
)

__all__ = [
    "BUCKETS",
    "EMPTY_RULES",
    "POLICY_NAMES",
    "Bucket",
    "PolicyName",
    "Rule",
    "RuleSet",
    "check_policy",
    "load_rules",
    "load_rules_file",
    "resolve",
]
