"""The risk class of one invocation and what kind of effect it has (shared by the risk tables)."""

from __future__ import annotations

from dataclasses import dataclass

from approvals.permissions.model.decisions import Risk

__all__ = ["RiskInfo"]


@dataclass(frozen=True, slots=True)
class RiskInfo:
    """The risk class of one invocation and what kind of effect it has."""

    risk: Risk
    reason: str
    egress: bool = False
    side_effect: bool = False
    # An interpreter or network program: never offered an "always" approval.
    broad: bool = False
    # Exposes secrets (an environment dump): a boundary ask that no rule or automation allows.
    secret: bool = False
    # Runs code handed to it in an option (`git -c`, `tar --to-command`, awk `system`): a wildcard
    # allow rule for the program must not approve that.
    runs_code: bool = False
    # Python modules the code imports that are neither stdlib nor well known: the command judge
    # lowers the risk when each one is a module of the workspace (its own code).
    imports: tuple[str, ...] = ()
