"""One path access (a read or a write) judged against the boundaries and the team's path rules.

Shared by every judge that meets a path: the command judge for each access, the fetch judge for a
`file://` URL, the engine for a `read`/`write` action.
"""

from __future__ import annotations

from approvals.permissions.boundaries.paths import Boundary
from approvals.permissions.model import Finding
from approvals.permissions.policy import RuleSet
from approvals.permissions.shell.words import UNKNOWN


def path_finding(
    boundary: Boundary, rules: RuleSet, text: str, *, write: bool, cwd: str | None = None
) -> Finding:
    """Boundary and read/write rules for one path access."""
    judged = boundary.judge(text, write=write, cwd=cwd)
    kind = "write" if write else "read"
    if judged.verdict == "deny":
        return Finding("deny", judged.risk, "floor", f"{judged.reason}: {judged.path}", broad=True)
    candidates = {judged.path}
    if UNKNOWN not in text and cwd != UNKNOWN:
        candidates.add(boundary.absolute(text, cwd))
    ws, home = boundary.workspace, boundary.home
    # A read deny also covers writes: what may not be read may not be overwritten either.
    for bucket_kind in {kind, "read"} if write else {kind}:
        for rule in rules.of("deny", bucket_kind):
            if any(rule.matches_path(p, workspace=ws, home=home) for p in candidates):
                return Finding("deny", judged.risk, "rule", f"denied by rule {rule.text}", rule=rule.text)
    for bucket_kind in {kind, "read"} if write else {kind}:
        for rule in rules.of("ask", bucket_kind):
            if any(rule.matches_path(p, workspace=ws, home=home) for p in candidates):
                return Finding(
                    "ask",
                    judged.risk,
                    "rule",
                    f"rule {rule.text} asks",
                    rule=rule.text,
                    sensitive=judged.sensitive,
                )
    if judged.verdict == "ask" and not judged.sensitive and judged.klass != "unknown":
        for rule in rules.of("allow", kind):
            if all(rule.matches_path(p, workspace=ws, home=home) for p in candidates):
                return Finding("allow", judged.risk, "rule", f"allowed by rule {rule.text}", rule=rule.text)
    egress = judged.klass == "network"
    return Finding(
        judged.verdict, judged.risk, "boundary", f"{judged.reason}: {judged.path}",
        sensitive=judged.sensitive, egress=egress, broad=egress,
    )  # fmt: skip
