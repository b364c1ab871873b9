"""Partial verdicts from each check, and how they combine into one decision (the most severe wins)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from approvals.permissions.model.decisions import RISK_ORDER, VERDICT_ORDER, Layer, Risk, Verdict

# When two findings have the same verdict, the one from the more fundamental layer explains it.
_LAYER_ORDER: dict[Layer, int] = {"risk": 0, "policy": 1, "boundary": 2, "rule": 3, "floor": 4}
# An allow is explained by the rule that allowed it, else by the risk class ("low, no rule: allow").
_ALLOW_LAYER_ORDER: dict[Layer, int] = {"boundary": 0, "floor": 0, "policy": 1, "risk": 2, "rule": 3}


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's opinion on (part of) an action."""

    verdict: Verdict
    risk: Risk
    layer: Layer
    reason: str
    rule: str | None = None
    sensitive: bool = False  # a secret or protected file: never auto-resolved
    egress: bool = False
    side_effect: bool = False
    broad: bool = False  # interpreter, network program or not plain words: no "always" offer


def worst(findings: Iterable[Finding]) -> Finding:
    """Combine: deny > ask > allow; risk is the maximum; flags are sticky."""
    items = list(findings)
    if not items:
        return Finding("ask", "medium", "risk", "nothing to judge")

    def rank(f: Finding) -> tuple[int, int, int]:
        order = _ALLOW_LAYER_ORDER if f.verdict == "allow" else _LAYER_ORDER
        return VERDICT_ORDER[f.verdict], order[f.layer], RISK_ORDER[f.risk]

    top = max(items, key=rank)
    risk = max((f.risk for f in items), key=RISK_ORDER.__getitem__)
    asks_or_worse = [f for f in items if VERDICT_ORDER[f.verdict] >= VERDICT_ORDER["ask"]]
    return Finding(
        verdict=top.verdict,
        risk=risk,
        layer=top.layer,
        reason=top.reason,
        rule=top.rule,
        sensitive=any(f.sensitive for f in asks_or_worse),
        egress=any(f.egress for f in items),
        side_effect=any(f.side_effect for f in items),
        broad=any(f.broad for f in items),
    )
