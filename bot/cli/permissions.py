"""`massgen-bot permissions check`: ask the permission engine about actions, one or a JSONL stream.

    massgen-bot permissions check command "git push origin main"
    massgen-bot permissions check --policy risk-based --rules rules.yaml --jsonl < actions.jsonl

Each decision is one JSON object per line. A bad input line yields an error object in its place
(order kept) and the exit status is 1 at the end; a bad `--rules` file is an error before anything runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from approvals.permissions import (
    ACTION_KINDS,
    EMPTY_RULES,
    POLICY_NAMES,
    Action,
    PermissionConfig,
    PermissionEngine,
    PermissionsError,
    PolicyName,
    RuleError,
    RuleSet,
    check_policy,
    load_rules,
    load_rules_file,
)


def register(subparsers: Any) -> None:
    """Add `permissions check` to the `massgen-bot` parser."""
    permissions = subparsers.add_parser("permissions", help="inspect the permission engine")
    commands = permissions.add_subparsers(dest="permissions_command", metavar="SUBCOMMAND", required=True)
    check = commands.add_parser(
        "check",
        help="judge actions: allow, ask or deny, with risk, layer and reason",
        description="Judge one action (ACTION TARGET) or a JSONL stream of actions on stdin (--jsonl).",
    )
    check.add_argument("--policy", choices=POLICY_NAMES, default="human", help="what to do with an ask")
    check.add_argument("--rules", type=Path, help="YAML or JSON file with allow/ask/deny rule lists")
    check.add_argument("--workspace", type=Path, default=None, help="workspace root (default: cwd)")
    check.add_argument("--jsonl", action="store_true", help='read {"action", "target", "rules"?} lines')
    check.add_argument("words", nargs="*", metavar="ACTION TARGET", help="e.g. command 'rm -rf build'")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Entry point for `permissions check`; returns the exit status."""
    try:
        rules = load_rules_file(args.rules) if args.rules is not None else EMPTY_RULES
        policy = check_policy(args.policy)
    except PermissionsError as exc:
        print(f"massgen-bot permissions check: {exc}", file=sys.stderr)
        return 1
    workspace = (args.workspace or Path.cwd()).absolute()
    try:
        checker = _Checker(workspace=workspace, policy=policy, rules=rules)
    except PermissionsError as exc:
        print(f"massgen-bot permissions check: {exc}", file=sys.stderr)
        return 1
    if args.jsonl:
        if args.words:
            print("massgen-bot permissions check: give ACTION TARGET or --jsonl, not both", file=sys.stderr)
            return 2
        return checker.stream(sys.stdin, sys.stdout)
    if len(args.words) < 2:
        print("massgen-bot permissions check: need ACTION TARGET (or --jsonl)", file=sys.stderr)
        return 2
    line = {"action": args.words[0], "target": " ".join(args.words[1:])}
    result = checker.check(line)
    _emit(result, sys.stdout)
    return 1 if "error" in result else 0


class _Checker:
    """One engine per distinct rule set (file rules plus a line's own rules)."""

    def __init__(self, *, workspace: Path, policy: PolicyName, rules: RuleSet) -> None:
        self._workspace = workspace
        self._policy = policy
        self._rules = rules
        self._engines: dict[str, PermissionEngine] = {}
        self._engine(None)  # build the base engine now: a bad workspace fails before any input is read

    def stream(self, lines: Iterable[str], out: TextIO) -> int:
        """Judge one JSON action per line; an error object replaces a bad line. Returns the exit status."""
        failed = False
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                item = json.loads(raw)
            except ValueError as exc:
                result: dict[str, object] = {"error": f"line {number}: invalid JSON ({exc})", "line": number}
            else:
                result = self.check(item, number)
            failed = failed or "error" in result
            _emit(result, out)
        return 1 if failed else 0

    def check(self, item: object, number: int | None = None) -> dict[str, object]:
        """One action (a parsed JSON object) to a decision object, or an error object."""
        where = f"line {number}: " if number is not None else ""
        if not isinstance(item, Mapping):
            return _error(f"{where}expected a JSON object", number)
        kind, target = item.get("action"), item.get("target")
        if kind not in ACTION_KINDS:
            return _error(
                f"{where}unknown action {kind!r} (known: {', '.join(sorted(ACTION_KINDS))})", number
            )
        if not isinstance(target, str):
            return _error(f"{where}target must be a string", number)
        try:
            engine = self._engine(item.get("rules"))
        except PermissionsError as exc:
            return _error(f"{where}{exc}", number)
        try:
            decision = engine.evaluate(Action(kind=kind, target=target))
        except Exception as exc:  # an engine bug must not stop the stream or look like a decision
            return _error(f"{where}internal error judging this action: {exc!r}", number)
        result: dict[str, object] = {"action": kind, "target": target, **decision.to_json()}
        result["always_offerable"] = decision.always_offerable
        if "id" in item:
            result["id"] = item["id"]  # lets a caller correlate lines without counting them
        return result

    def _engine(self, line_rules: object) -> PermissionEngine:
        key = json.dumps(line_rules, sort_keys=True)
        engine = self._engines.get(key)
        if engine is None:
            if line_rules is not None and not isinstance(line_rules, Mapping):
                raise RuleError("rules must be an object with allow/ask/deny lists")
            rules = self._rules.merged(load_rules(line_rules)) if line_rules else self._rules
            config = PermissionConfig(workspace=self._workspace, policy=self._policy, rules=rules)
            engine = self._engines[key] = PermissionEngine(config)
        return engine


def _error(message: str, number: int | None) -> dict[str, object]:
    result: dict[str, object] = {"error": message}
    if number is not None:
        result["line"] = number
    return result


def _emit(result: Mapping[str, object], out: TextIO) -> None:
    out.write(json.dumps(result) + "\n")
    out.flush()
