"""The permission engine: one pure decision per action (floor → rules → boundaries → risk → policy).

Always on: a team without a `permissions:` block gets the `human` policy and no extra rules, and
the floor, secret and workspace boundaries hold whatever the configuration says.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from approvals.permissions.boundaries import (
    Boundary,
    egress_hosts,
    hosts_note,
    judge_fetch,
    path_finding,
    within,
)
from approvals.permissions.budget import Clock, JudgmentTimeout, TooComplex, check_deadline, deadline
from approvals.permissions.commands import CommandJudge
from approvals.permissions.floor import SYSTEM_DIRS, classify_path
from approvals.permissions.model import (
    ACTION_KINDS,
    RISK_ORDER,
    VERDICT_ORDER,
    Action,
    Decision,
    Finding,
    PermissionConfigError,
    worst,
)
from approvals.permissions.policy import BUCKETS, EMPTY_RULES, POLICY_NAMES, PolicyName, RuleSet, resolve
from approvals.permissions.shell.invocation import Invocation, expand
from approvals.permissions.shell.listings import lists_workspace_paths
from approvals.permissions.shell.words import UNKNOWN

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
# Longest target judged per kind (a command, a path, a URL or a tool name); longer is denied.
MAX_COMMAND_CHARS = 16 * 1024
MAX_TARGET_CHARS = 4 * 1024
# Bidirectional embeddings, overrides and isolates: the text shown is not the text run.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Problems that hide the program or the code that runs (not merely an unusual construct).
_HIDING = (
    "program name is computed", "program name is obfuscated", "runs code read from a pipe",
    "runs shell text computed at run time", "eval runs text", "defines an alias",
    "a stored value is evaluated", "runs code assembled from its input", "defines a shell function",
    "interpreter code computed at run time",
)  # fmt: skip
# Verbs that destroy their operands: with operands the text does not show, only a human may allow.
_DESTROYERS = frozenset({"rm", "rmdir", "shred", "unlink", "truncate", "wipe", "srm", "mv"})
_SHOWN_INPUT = ("heredoc", "herestring")
_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete"})
_LIST_SOURCES = frozenset({"find", "fd", "ls", "git", "grep", "rg", "echo", "printf"})
_URL_WORD = re.compile(r"(?:https?|ftp|wss?)://", re.IGNORECASE)
_UNFAITHFUL = re.compile("[\x00\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


_MKTEMP = re.compile(r"\b([A-Za-z_]\w*)=\"?\$\(mktemp\b")
# One pass each over the text (never one scan per name: 16 KiB of names took 11-24 s that way).
_SETS = re.compile(r"\b([A-Za-z_]\w*)\s*=|\bfor\s+([A-Za-z_]\w*)\b|\bread\b([^;&|\n]*)")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _temporary_names(text: str) -> frozenset[str]:
    """Variables the text sets once, from `$(mktemp …)`, and never again (nor by `read` or `for`)."""
    candidates = set(_MKTEMP.findall(text))
    if not candidates:
        return frozenset()
    sets: dict[str, int] = dict.fromkeys(candidates, 0)
    for match in _SETS.finditer(text):
        assigned, looped, read_args = match.groups()
        names = [assigned or looped] if read_args is None else _NAME.findall(read_args)
        for name in names:
            if name in sets:
                sets[name] += 1
    return frozenset(name for name, count in sets.items() if count == 1)


def _unjudged(why: str) -> Finding:
    """Past a bound (size, structure, time): a human may look at it, automation never allows it."""
    return Finding("ask", "high", "policy", f"{why} (fails closed: ask)", sensitive=True, broad=True)


def unfaithful(text: str, limit: int) -> str | None:
    """Why `text` cannot be judged (or shown to an approver) faithfully, or None."""
    if len(text) > limit:
        return f"too long to judge ({len(text)} chars > {limit})"
    match = _UNFAITHFUL.search(text)
    if match is None:
        return None
    ch = match.group()
    if ch == "\x00":
        return "contains a NUL byte, which the shell cannot pass on"
    if ch in _BIDI:
        return f"contains a bidirectional control (U+{ord(ch):04X}): what is shown is not what runs"
    return f"contains a lone surrogate (U+{ord(ch):04X}): invalid UTF-8 or text that cannot be encoded"


@dataclass(frozen=True, kw_only=True)
class PermissionConfig:
    """Everything the engine needs; immutable, so one engine can serve many concurrent calls."""

    workspace: Path
    policy: PolicyName = "human"
    rules: RuleSet = field(default_factory=lambda: EMPTY_RULES)
    readable_roots: tuple[Path, ...] = ()
    protected: tuple[str, ...] = DEFAULT_PROTECTED
    home: Path | None = None
    # Budget per decision, in CPU seconds of the judging thread (so a busy machine descheduling the
    # thread does not turn an ordinary command into a deny); past it the judgment stops, denied.
    budget_seconds: float = 0.5
    clock: Clock = time.thread_time


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
        """The engine's verdict on one action, and what the policy resolves an ask to (never raises)."""
        try:
            finding = self._judged(action)
        except JudgmentTimeout:
            finding = _unjudged("judgment took too long")
        except TooComplex as exc:
            finding = _unjudged(f"too complex to judge: {exc}")
        except Exception as exc:
            finding = Finding("deny", "high", "policy", f"could not judge: {type(exc).__name__}", broad=True)
        if finding.verdict == "ask" and not finding.sensitive and self.scope_key(action) in grants:
            finding = Finding(
                "allow", finding.risk, "policy", "granted for this run", finding.rule,
                egress=finding.egress, side_effect=finding.side_effect, broad=finding.broad,
            )  # fmt: skip
        return self._decision(action, finding)

    def _judged(self, action: Action) -> Finding:
        """The worst finding on `action` within the budget, given one second try.

        A judgment's own work is bounded deterministically (`budget.spend`); the CPU deadline is the
        backstop. A pause that is not the judgment's (a garbage-collector cycle over a large heap, CPU
        time a busy host accounts to the thread) can spend it once; it does not recur on the retry,
        whose parse is cached. Text that really needs the time runs out twice and fails closed.
        """
        try:
            with deadline(self.config.clock, self.config.budget_seconds):
                return worst(self._checked(action))
        except JudgmentTimeout:
            with deadline(self.config.clock, self.config.budget_seconds):
                return worst(self._checked(action))

    async def evaluate_async(self, action: Action, *, grants: frozenset[str] = frozenset()) -> Decision:
        """`evaluate` in a worker thread, so a judgment never blocks the event loop (same deadline)."""
        return await asyncio.to_thread(self.evaluate, action, grants=grants)

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
            hosts=tuple(dict.fromkeys(h for d in decisions for h in d.hosts)),
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

    def _checked(self, action: Action) -> Iterator[Finding]:
        """The findings, with the deadline checked between them and faithfulness checked first."""
        target = action.target if isinstance(action.target, str) else ""
        limit = MAX_COMMAND_CHARS if action.kind == "command" else MAX_TARGET_CHARS
        if isinstance(action.target, str) and len(target) > limit:
            yield _unjudged(f"{action.kind} too long to judge ({len(target)} chars > {limit})")
            return
        why = unfaithful(target, limit) if isinstance(action.target, str) else "the target is not text"
        if why is not None:
            yield Finding("deny", "high", "policy", f"{action.kind} {why}", broad=True)
            return
        if action.kind == "command":
            expansion = expand(target)
            if expansion.refused is not None:
                refused = f"command {expansion.refused}"
                yield (
                    Finding("deny", "high", "policy", refused, broad=True)
                    if "NUL" in refused
                    else _unjudged(refused)
                )
                return
            hidden = [p for p in expansion.problems if any(m in p for m in _HIDING)]
            if hidden:
                # What runs is not in the text: a human may allow it, automation never does.
                reason = f"cannot see what runs: {hidden[0]}"
                yield Finding("ask", "high", "policy", reason, sensitive=True, broad=True)
            yield from self._command_urls(expansion.invocations)
            target_hidden = self._hidden_target(expansion.invocations, _temporary_names(target))
            if target_hidden is not None:
                # What it destroys is not in the text (a file, a pipe, a substitution): likewise.
                yield Finding("ask", "high", "policy", target_hidden, sensitive=True, broad=True)
        for finding in self._findings(action):
            check_deadline()
            yield finding

    def _command_urls(self, invocations: Sequence[Invocation]) -> Iterator[Finding]:
        """URLs in a command's words meet the fetch deny and ask rules (and the floor) too.

        `deny: fetch(https://x/admin/**)` holds for `curl https://x/%252e%252e/admin/u`; only what
        denies or asks is taken (the command's own rules and risk decide the rest).
        """
        for inv in invocations:
            for word in inv.words[1:]:
                text = word.text.partition("=")[2] if word.text.startswith("--") else word.text
                if UNKNOWN in text or not _URL_WORD.match(text):
                    continue
                for finding in judge_fetch(text, self._boundary, self.config.rules):
                    if finding.verdict == "deny" or (finding.layer == "rule" and finding.verdict == "ask"):
                        yield finding

    def _hidden_target(self, invocations: Sequence[Invocation], temporary: frozenset[str]) -> str | None:
        """A destructive verb whose targets the text does not show (`xargs rm < list`, `rm $(cat l)`).

        Not hidden: a substitution listing workspace files (`rm $(git ls-files -o)`), and a name
        set once from `$(mktemp)` (`tmp=$(mktemp); …; rm -f "$tmp"`).
        """
        found_safely = True  # the last `find`'s filter: can it name only plain workspace files?
        for inv in invocations:
            if inv.program == "find":
                found_safely = not self._may_name_git(inv.argv)
                if "-delete" in inv.argv and not found_safely:
                    return "hidden target: find deletes what its tests match, which can be .git or a secret"
                continue
            if inv.program not in _DESTROYERS:
                continue
            if inv.wrappers[:1] == ("find",) and not found_safely:
                return (
                    f"hidden target: {inv.program} acts on what find matches, which can be .git or a secret"
                )
            from_input = "xargs" in inv.wrappers and inv.extra_args and inv.command.stdin not in _SHOWN_INPUT
            if from_input and not self._listed_inside(inv.command.upstream):
                return f"hidden target: {inv.program} acts on paths read from its input"
            operands = [
                w.text
                for w in inv.words[1:]
                if not w.text.startswith("-")
                and not w.listing
                and not (w.variables and set(w.variables) <= temporary)
            ]
            if any(UNKNOWN in text for text in operands):
                return f"hidden target: {inv.program} acts on paths computed at run time"
        return None

    def _listed_inside(self, upstream: tuple[str, ...]) -> bool:
        """`find . -name '*.pyc' | xargs rm`: a listing of workspace paths only.

        The listing cannot name a hidden file either: `ls -A | xargs rm -rf` would delete `.git`.
        """
        if not upstream or posixpath.basename(upstream[0]) not in _LIST_SOURCES:
            return False
        if self._may_name_git(upstream):
            return False
        paths = [a for a in upstream[1:] if not a.startswith("-") and ("/" in a or a.startswith((".", "~")))]
        absolute = self._boundary.absolute
        return all(UNKNOWN not in p and within(absolute(p), self._boundary.workspace) for p in paths)

    def _may_name_git(self, argv: Sequence[str]) -> bool:
        """Whether a listing can print the workspace's own `.git` (or a hidden secret beside it).

        `find .` with no name filter, `ls -A` of the workspace, `echo .git`. A listing of a named
        subfolder is no worse than `rm -rf` of that folder, which is not asked either.
        """
        program, args = posixpath.basename(argv[0]), list(argv[1:])
        if program in ("echo", "printf"):
            return any(".git" in a.split("/") for a in args)
        if program == "find":
            head = next((i for i, a in enumerate(args) if a in _FIND_ACTIONS), len(args))
            first_test = next((i for i, a in enumerate(args) if a.startswith(("-", "(", "!"))), len(args))
            roots = args[:first_test] or ["."]  # find's roots lead; none is the current folder
            at_top = any(self._at_or_above_workspace(r) for r in roots)
            return at_top and not lists_workspace_paths(["find", *args[:head]])
        if program == "ls":
            hidden = any(
                a.startswith("-") and not a.startswith("--") and ("a" in a or "A" in a) for a in args
            )
            operands = [a for a in args if not a.startswith("-")] or ["."]
            return hidden and any(self._at_or_above_workspace(o) for o in operands)
        return False

    def _at_or_above_workspace(self, text: str) -> bool:
        path = self._boundary.absolute(text)
        return UNKNOWN in text or within(self._boundary.workspace, path)

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
                if write:
                    yield from self._write_floor(action.target.strip())
                yield path_finding(self._boundary, self.config.rules, action.target.strip(), write=write)
        elif action.kind == "fetch":
            yield from judge_fetch(action.target.strip(), self._boundary, self.config.rules)
        else:
            yield self._tool(action.target.strip())

    def _write_floor(self, text: str) -> Iterator[Finding]:
        """Writing a file over a system file or a device is the floor's, whatever the rules say."""
        boundary = self._boundary
        klass = classify_path(boundary.absolute(text), boundary.home, boundary.workspace)
        if klass in ("deep", "device", "root"):
            yield Finding(
                "deny", "critical", "floor", f"overwrites a system file or device: {text}", broad=True
            )

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
        hosts = egress_hosts(action) if finding.egress else ()
        reason = finding.reason if not finding.egress else f"{finding.reason} · {hosts_note(hosts)}"
        return Decision(
            verdict=finding.verdict,
            resolved=resolved,
            risk=finding.risk,
            layer=finding.layer,
            reason=reason if resolved == finding.verdict else f"{self.config.policy} policy: {reason}",
            rule=finding.rule,
            side_effect=finding.side_effect,
            egress=finding.egress,
            always_offerable=self._always_offerable(action, finding),
            hosts=hosts,
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
