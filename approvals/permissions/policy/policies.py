"""What a policy does with an ask: `human` leaves it to approvers; automation decides by risk."""

from __future__ import annotations

from typing import Literal, get_args

from approvals.permissions.model import Risk, RuleError, Verdict

PolicyName = Literal["human", "risk-based", "deny-all", "allow-all"]
POLICY_NAMES: tuple[str, ...] = get_args(PolicyName)


def resolve(verdict: Verdict, risk: Risk, *, sensitive: bool, policy: PolicyName) -> Verdict:
    """Resolve an engine verdict under a policy.

    Only an ask is ever changed. Secrets and protected files are never resolved to allow by
    automation: a human approver may allow them, a policy may not.
    """
    if verdict != "ask" or policy == "human":
        return verdict
    if policy == "deny-all" or sensitive:
        return "deny"
    if policy == "allow-all":
        return "allow"
    # risk-based; a name outside PolicyName (unchecked input) also lands here and only gets the
    # risk-based answer, never allow-all's.
    return "allow" if risk in ("low", "medium") else "deny"


def check_policy(name: str) -> PolicyName:
    """Validate a policy name from configuration or the command line."""
    if name not in POLICY_NAMES:
        raise RuleError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})")
    return name  # type: ignore[return-value]
