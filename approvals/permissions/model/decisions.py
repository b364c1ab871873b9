"""The engine's verdict on one action (or one tool call's set of actions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["allow", "ask", "deny"]
Risk = Literal["low", "medium", "high", "critical"]
Layer = Literal["floor", "rule", "boundary", "risk", "policy"]

VERDICT_ORDER: dict[Verdict, int] = {"allow": 0, "ask": 1, "deny": 2}
RISK_ORDER: dict[Risk, int] = {"low": 0, "medium": 1, "high": 2, "critical": 3}


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """`verdict` is the engine's; `resolved` is what the policy does with an ask (`human` leaves it ask)."""

    verdict: Verdict
    resolved: Verdict
    risk: Risk
    layer: Layer
    reason: str
    rule: str | None = None
    # Side-effect class for the orchestrator's "side effects once" rule: push/publish/post actions.
    side_effect: bool = False
    # The action needs the network (the sandbox opens it only for an approved egress action).
    egress: bool = False
    # True when an "always" approval (a persisted allow rule) may be offered for this action.
    always_offerable: bool = False
    hosts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The decision as the JSON object the CLI and the audit print."""
        return {
            "decision": self.verdict,
            "resolved": self.resolved,
            "risk": self.risk,
            "layer": self.layer,
            "reason": self.reason,
            "rule": self.rule,
            "side_effect": self.side_effect,
            "egress": self.egress,
        }
