"""The permission engine: one pure decision per action (floor → rules → boundaries → risk → policy).

Always on: a team without a `permissions:` block gets the `human` policy and no extra rules, and
the floor, secret and workspace boundaries hold whatever the configuration says.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from approvals.permissions.actions import ACTION_KINDS, Action
from approvals.permissions.commands import CommandJudge, path_finding
from approvals.permissions.decisions import RISK_ORDER, VERDICT_ORDER, Decision
from approvals.permissions.errors import PermissionConfigError
from approvals.permissions.findings import Finding, worst
from approvals.permissions.floor import SYSTEM_DIRS
from approvals.permissions.paths import Boundary
from approvals.permissions.policy import POLICY_NAMES, PolicyName, resolve
from approvals.permissions.rules import BUCKETS, EMPTY_RULES, RuleSet
from approvals.permissions.shell.invocation import expand

__all__ = ["DEFAULT_PROTECTED", "PermissionConfig", "PermissionEngine", "PolicyName"]

# Inside the workspace but never written without asking: code that runs on git operations, and policy.
DEFAULT_PROTECTED: tuple[str, ...] = (
    ".git/hooks/**",
    ".git/config",
    ".massgen/**",
    "massgen.yaml",
    "team.yaml",
)
_SIDE_EFFECT_TOOL = re.compile(
    r"(create|send|post|publish|delete|remove|merge|push|deploy|update|write|upload|release|invite|"
    r"comment|close|approve|transfer|pay|charge|drop|destroy)",
    re.I,
)
_MAX_ALWAYS_CHARS = 200


@dataclass(frozen=True, kw_only=True)
class PermissionConfig:
    """Everything the engine needs; immutable, so one engine can serve many concurrent calls."""

    workspace: Path
    policy: PolicyName = "human"
    rules: RuleSet = field(default_factory=lambda: EMPTY_RULES)
    readable_roots: tuple[Path, ...] = ()
    protected: tuple[str, ...] = DEFAULT_PROTECTED
    home: Path | None = None


class PermissionEngine:
    """Judges actions for one agent's workspace under one rule set and policy."""

    def __init__(self, config: PermissionConfig) -> None:
        self.config = config
        if config.policy not in POLICY_NAMES:
            raise PermissionConfigError(
                f"unknown policy {config.policy!r} (known: {', '.join(POLICY_NAMES)})"
            )
        home = config.home if config.home is not None else Path.home()
        self._boundary = Boundary.create(
            str(Path(config.workspace).absolute()),
            str(Path(home).absolute()),
            tuple(str(Path(r).absolute()) for r in config.readable_roots),
            config.protected,
        )
        if self._boundary.workspace in SYSTEM_DIRS or self._boundary.workspace == "/":
            # Everything would be "inside": fail closed instead of allowing writes all over the system.
            raise PermissionConfigError(
                f"workspace {self._boundary.workspace!r} is the root or a system directory"
            )
        self._commands = CommandJudge(self._boundary, config.rules)

    def evaluate(self, action: Action, *, grants: frozenset[str] = frozenset()) -> Decision:
        """The engine's verdict on one action, and what the policy resolves an ask to."""
        finding = worst(self._findings(action))
        if finding.verdict == "ask" and not finding.sensitive and self.scope_key(action) in grants:
            finding = Finding(
                "allow", finding.risk, "policy", "granted for this run", finding.rule,
                egress=finding.egress, side_effect=finding.side_effect, broad=finding.broad,
            )  # fmt: skip
        return self._decision(action, finding)

    def evaluate_many(self, actions: Sequence[Action], *, grants: frozenset[str] = frozenset()) -> Decision:
        """One decision for a tool call's actions: the most severe verdict, the highest risk."""
        if not actions:
            return self.evaluate(Action(kind="tool", target=""), grants=grants)
        decisions = [self.evaluate(a, grants=grants) for a in actions]
        top = max(
            decisions, key=lambda d: (VERDICT_ORDER[d.verdict], VERDICT_ORDER[d.resolved], RISK_ORDER[d.risk])
        )
        resolved = max((d.resolved for d in decisions), key=VERDICT_ORDER.__getitem__)
        return Decision(
            verdict=top.verdict,
            resolved=resolved,
            risk=max((d.risk for d in decisions), key=RISK_ORDER.__getitem__),
            layer=top.layer,
            reason=top.reason,
            rule=top.rule,
            side_effect=any(d.side_effect for d in decisions),
            egress=any(d.egress for d in decisions),
            always_offerable=all(d.always_offerable or d.verdict == "allow" for d in decisions)
            and any(d.always_offerable for d in decisions),
        )

    def scope_key(self, action: Action) -> str:
        """A normalised form of the action: what a "this run" approval grants."""
        if action.kind == "command":
            return f"command({' '.join(action.target.split())})"
        if action.kind in ("read", "write"):
            return f"{action.kind}({self._boundary.absolute(action.target.strip())})"
        if action.kind == "fetch":
            return f"fetch({action.target.strip()})"
        return f"{action.kind}({action.target.strip()})"

    def _findings(self, action: Action) -> Iterator[Finding]:
        if action.kind not in ACTION_KINDS:
            yield Finding("deny", "medium", "policy", f"unknown action kind {action.kind!r}")
        elif action.kind == "command":
            yield from self._commands.judge(action.target)
        elif action.kind in ("read", "write"):
            if not action.target.strip() or "\x00" in action.target:
                yield Finding("deny", "medium", "policy", "empty or invalid path")
            else:
                write = action.kind == "write"
                yield path_finding(self._boundary, self.config.rules, action.target.strip(), write=write)
        elif action.kind == "fetch":
            yield from self._fetch(action.target.strip())
        else:
            yield self._tool(action.target.strip())

    def _fetch(self, url: str) -> Iterator[Finding]:
        try:
            parts = urlsplit(url if "://" in url else f"https://{url}")
        except ValueError:
            yield Finding("ask", "high", "risk", f"malformed URL {url!r}", egress=True, broad=True)
            return
        if parts.scheme == "file":
            yield path_finding(self._boundary, self.config.rules, parts.path or "/", write=False)
            return
        if parts.scheme not in ("http", "https") or not parts.hostname:
            yield Finding("ask", "high", "risk", f"unusual URL {url!r}", egress=True, broad=True)
            return
        rules = self.config.rules
        # Credentials, backslashes, spaces or non-ASCII in the address are how URL parsers disagree
        # about the host: deny and ask rules still apply, allow rules do not.
        tricky = "@" in parts.netloc or any(ch in url for ch in "\\ \t\r\n") or not parts.netloc.isascii()
        for bucket in BUCKETS:
            for rule in rules.of(bucket, "fetch"):
                if bucket == "allow" and tricky:
                    continue
                if rule.matches_url(url):
                    yield Finding(
                        bucket, "high", "rule", f"{bucket} rule {rule.text}", rule=rule.text, egress=True
                    )
                    return
        yield Finding("ask", "high", "risk", f"network request to {parts.hostname}", egress=True, broad=True)

    def _tool(self, name: str) -> Finding:
        rules = self.config.rules
        for bucket in BUCKETS:
            for rule in rules.of(bucket, "tool"):
                if rule.matches_tool(name):
                    return Finding(bucket, "medium", "rule", f"{bucket} rule {rule.text}", rule=rule.text)
        if not name:
            return Finding("ask", "medium", "risk", "no action to judge")
        if _SIDE_EFFECT_TOOL.search(name):
            return Finding(
                "ask", "high", "risk", f"tool {name} has outside effects", side_effect=True, broad=True
            )
        return Finding("ask", "medium", "risk", f"unknown tool {name}")

    def _decision(self, action: Action, finding: Finding) -> Decision:
        resolved = resolve(
            finding.verdict, finding.risk, sensitive=finding.sensitive, policy=self.config.policy
        )
        return Decision(
            verdict=finding.verdict,
            resolved=resolved,
            risk=finding.risk,
            layer=finding.layer,
            reason=finding.reason
            if resolved == finding.verdict
            else f"{self.config.policy} policy: {finding.reason}",
            rule=finding.rule,
            side_effect=finding.side_effect,
            egress=finding.egress,
            always_offerable=self._always_offerable(action, finding),
        )

    def _always_offerable(self, action: Action, finding: Finding) -> bool:
        """An "always" approval only for a fully shown, plain, non-broad, not-high action."""
        if finding.verdict != "ask" or finding.sensitive or finding.broad or finding.egress:
            return False
        if RISK_ORDER[finding.risk] >= RISK_ORDER["high"] or len(action.target) > _MAX_ALWAYS_CHARS:
            return False
        if action.kind == "command":
            expansion = expand(action.target)
            return not expansion.problems and all(
                w.plain and not w.glob for i in expansion.invocations for w in i.words
            )
        return not any(ch in action.target for ch in "*?[")
