"""Allow / ask / deny rules: `command(git push *)`, `write(src/**)`, `fetch(domain:*.github.com)`.

A malformed rule, an unknown action or a failing `match`/`not_match` example is a `RuleError` at
load time: a typo never silently weakens the policy.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from approvals.permissions.model import ACTION_KINDS, URL, ActionKind, RuleError, normalise

Bucket = Literal["allow", "ask", "deny"]
BUCKETS: tuple[Bucket, ...] = ("deny", "ask", "allow")
_RULE = re.compile(r"^\s*([A-Za-z_]+)\s*(?:\((.*)\))?\s*$", re.S)
_ENTRY_KEYS = frozenset({"rule", "match", "not_match", "reason", "justification"})
# Nominal roots used to check path examples at load time, before any workspace exists.
_EXAMPLE_WORKSPACE = "/workspace"
_EXAMPLE_HOME = "/home/user"


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule; `text` is how the user wrote it (shown in decisions and audits)."""

    bucket: Bucket
    kind: ActionKind
    pattern: str
    text: str

    @property
    def has_wildcard(self) -> bool:
        """True when the pattern can match more than one target."""
        return "*" in self.pattern or "?" in self.pattern

    def matches_command(self, text: str) -> bool:
        """Match one simple command's text (words joined by single spaces); linear, no backtracking."""
        body, optional_args = _command_glob(self.pattern)
        return glob_match(body, text) or (optional_args and glob_match(body + " *", text))

    def matches_path(self, path: str, *, workspace: str, home: str) -> bool:
        """Match a normalised absolute path; relative patterns are anchored at the workspace."""
        return path_match(_path_segments(self.pattern, workspace, home), path)

    def matches_url(self, url: str | URL) -> bool:
        """Match a normalised URL: `*` never crosses a `.` in the host nor leaves the host for the path."""
        if not isinstance(url, URL):
            parsed = normalise(url)
            if isinstance(parsed, str):
                return False
            url = parsed
        if self.pattern.startswith("domain:"):
            return host_match(self.pattern[7:].strip(), url.host)
        if self.pattern in ("*", "**"):
            return True
        scheme, host, port, path = _url_pattern(self.pattern)
        if not glob_match(scheme, url.scheme) or not host_match(host, url.host):
            return False
        if port != url.port:
            return False
        target = url.path + (f"?{url.query}" if url.query else "")
        return glob_match(path, target) or (path.endswith("/*") and glob_match(path[:-2], target))

    def constrains_path(self) -> bool:
        """The URL pattern says which paths (not `domain:`, `*`, nor a host with `/**`)."""
        if self.pattern.startswith("domain:") or self.pattern in ("*", "**"):
            return False
        path = _url_pattern(self.pattern)[3]
        return path not in ("/**", "/*", "*", "**")

    def matches_url_host(self, url: URL) -> bool:
        """Match the URL on everything but its path (for a path servers may read differently)."""
        if self.pattern.startswith("domain:"):
            return host_match(self.pattern[7:].strip(), url.host)
        if self.pattern in ("*", "**"):
            return True
        scheme, host, port, _ = _url_pattern(self.pattern)
        return glob_match(scheme, url.scheme) and host_match(host, url.host) and port == url.port

    def names_host(self, host: str) -> bool:
        """The rule names this host literally (no wildcard): how a local address may be allowed."""
        pattern = (
            self.pattern[7:].strip() if self.pattern.startswith("domain:") else _url_pattern(self.pattern)[1]
        )
        return "*" not in pattern and "?" not in pattern and pattern.lower().rstrip(".") == host

    def matches_tool(self, name: str) -> bool:
        """Match a tool name (glob)."""
        return fnmatch.fnmatchcase(name, self.pattern)


@dataclass(frozen=True, slots=True)
class RuleSet:
    """Rules by bucket; the engine applies deny > ask > allow whatever the order they were written."""

    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    _by_kind: dict[tuple[Bucket, str], tuple[Rule, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        for bucket in BUCKETS:
            for kind in ACTION_KINDS:
                self._by_kind[(bucket, kind)] = tuple(r for r in getattr(self, bucket) if r.kind == kind)

    def of(self, bucket: Bucket, kind: str) -> tuple[Rule, ...]:
        """Rules of one bucket for one action kind."""
        return self._by_kind.get((bucket, kind), ())

    def merged(self, other: RuleSet) -> RuleSet:
        """Both sets' rules (deny still wins across them)."""
        return RuleSet(allow=self.allow + other.allow, ask=self.ask + other.ask, deny=self.deny + other.deny)


EMPTY_RULES = RuleSet()


def parse_rule(text: str, bucket: Bucket) -> Rule:
    """Parse `action(pattern)`; a bare action means every target of that kind."""
    if not isinstance(text, str) or not text.strip():
        raise RuleError("a rule must be a non-empty string like 'command(git status)'", str(text))
    match = _RULE.match(text)
    if match is None:
        raise RuleError("expected action(pattern), e.g. command(git push *) or read(src/**)", text)
    kind, pattern = match.group(1), match.group(2)
    if kind not in ACTION_KINDS:
        known = ", ".join(sorted(ACTION_KINDS))
        raise RuleError(f"unknown action {kind!r} (known: {known})", text)
    pattern = "*" if pattern is None else pattern.strip()
    if not pattern:
        raise RuleError("empty pattern; write action(*) to mean every target", text)
    if pattern.count("(") != pattern.count(")") and kind != "command":
        raise RuleError("unbalanced parentheses", text)
    if kind == "fetch" and pattern.startswith("domain:") and not pattern[7:].strip():
        raise RuleError("domain: needs a host pattern", text)
    rule = Rule(bucket=bucket, kind=kind, pattern=pattern, text=text.strip())  # type: ignore[arg-type]
    try:
        _compile(rule)
    except re.error as exc:
        raise RuleError(f"bad pattern ({exc})", text) from None
    return rule


def _compile(rule: Rule) -> None:
    if rule.kind == "command":
        _command_regex(rule.pattern)
    elif rule.kind in ("read", "write"):
        _path_segments(rule.pattern, _EXAMPLE_WORKSPACE, _EXAMPLE_HOME)


def load_rules(data: Mapping[str, Any] | None) -> RuleSet:
    """Rules from `{"allow": [...], "ask": [...], "deny": [...]}` (or a team file's shapes)."""
    if data is None:
        return EMPTY_RULES
    if not isinstance(data, Mapping):
        raise RuleError("rules must be a mapping with allow/ask/deny lists")
    data = _unwrap_shape(data)
    unknown = set(data) - set(BUCKETS)
    if unknown:
        raise RuleError(f"unknown rule list(s) {sorted(unknown)}; expected allow, ask, deny")
    buckets: dict[Bucket, list[Rule]] = {b: [] for b in BUCKETS}
    for bucket in BUCKETS:
        entries = data.get(bucket) or []
        if isinstance(entries, str) or not isinstance(entries, Sequence):
            raise RuleError(f"{bucket} must be a list of rules")
        for entry in entries:
            buckets[bucket].append(_load_entry(entry, bucket))
    return RuleSet(allow=tuple(buckets["allow"]), ask=tuple(buckets["ask"]), deny=tuple(buckets["deny"]))


def _unwrap_shape(data: Mapping[str, Any]) -> Mapping[str, Any]:
    if "permissions" in data and set(data) <= {"permissions", "policy"}:
        data = data["permissions"] or {}
        if not isinstance(data, Mapping):
            raise RuleError("permissions must be a mapping")
        return _unwrap_shape({k: v for k, v in data.items() if k in ("rules", *BUCKETS)})
    if "rules" in data and not set(data) & set(BUCKETS):
        inner = data["rules"] or {}
        if not isinstance(inner, Mapping):
            raise RuleError("rules must be a mapping with allow/ask/deny lists")
        return inner
    return data


def _load_entry(entry: object, bucket: Bucket) -> Rule:
    if isinstance(entry, str):
        return parse_rule(entry, bucket)
    if not isinstance(entry, Mapping) or "rule" not in entry:
        raise RuleError("a rule must be a string or a mapping with a 'rule' key", repr(entry))
    unknown = set(entry) - _ENTRY_KEYS
    text = entry["rule"]
    if unknown:
        raise RuleError(f"unknown key(s) {sorted(unknown)}", str(text))
    rule = parse_rule(text, bucket)
    for key, expected in (("match", True), ("not_match", False)):
        examples = entry.get(key) or []
        if isinstance(examples, str) or not isinstance(examples, Sequence):
            raise RuleError(f"{key} must be a list of examples", rule.text)
        for example in examples:
            if example_matches(rule, str(example)) != expected:
                verb = "should match" if expected else "should not match"
                raise RuleError(f"example {example!r} {verb}", rule.text)
    return rule


def example_matches(rule: Rule, example: str) -> bool:
    """Whether a rule matches an example target, judged as the engine would."""
    if rule.kind == "command":
        from approvals.permissions.shell.invocation import (
            expand,  # local: rules stay importable without the grammar
        )

        texts = [inv.text for inv in expand(example).invocations] or [example.strip()]
        return any(rule.matches_command(t) for t in texts)
    if rule.kind in ("read", "write"):
        path = example
        if example.startswith("~"):
            path = _EXAMPLE_HOME + example[1:]
        path = posixpath.normpath(posixpath.join(_EXAMPLE_WORKSPACE, path))
        return rule.matches_path(path, workspace=_EXAMPLE_WORKSPACE, home=_EXAMPLE_HOME)
    if rule.kind == "fetch":
        return rule.matches_url(example)
    return rule.matches_tool(example)


def load_rules_file(path: Path) -> RuleSet:
    """Rules from a YAML or JSON file; a missing or malformed file is a `RuleError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleError(f"cannot read rules file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise RuleError(f"rules file {str(path)!r} is not valid YAML/JSON: {exc}") from None
    if data is None:
        return EMPTY_RULES
    if not isinstance(data, Mapping):
        raise RuleError(f"rules file {str(path)!r} must hold a mapping with allow/ask/deny lists")
    return load_rules(data)


@functools.lru_cache(maxsize=1024)
def _command_glob(pattern: str) -> tuple[str, bool]:
    """The glob over command text, and whether a trailing ` *` (or legacy `:*`) may match nothing."""
    pattern = " ".join(pattern.split())
    if pattern.endswith(":*"):
        pattern = pattern[:-2] + " *"
    head, sep, tail = pattern.partition(" ")
    if "/" in head and "*" not in head:
        head = posixpath.basename(head)
    pattern = head + sep + tail
    optional_args = pattern.endswith(" *") and pattern != " *"
    return (pattern[:-2] if optional_args else pattern), optional_args


def _command_regex(pattern: str) -> None:
    """Validate a command pattern at load time (every text is a valid glob)."""
    _command_glob(pattern)


def glob_match(pattern: str, text: str) -> bool:
    """`*` matches any run of characters; linear-time (greedy leftmost search of the literal parts)."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return pattern == text
    first, *middle, last = parts
    if len(text) < len(first) + len(last) or not text.startswith(first) or not text.endswith(last):
        return False
    position, end = len(first), len(text) - len(last)
    for part in middle:
        found = text.find(part, position, end)
        if found < 0:
            return False
        position = found + len(part)
    return True


def host_match(pattern: str, host: str) -> bool:
    """`*.example.com`: one or more labels before example.com; elsewhere `*` stays inside one label."""
    pattern = pattern.lower().rstrip(".")
    if pattern == "*":
        return bool(host)
    labels = host.split(".")
    if pattern.startswith("*."):
        rest = pattern[2:].split(".")
        return len(labels) > len(rest) and all(
            fnmatch.fnmatchcase(h, p) for h, p in zip(labels[-len(rest) :], rest, strict=True)
        )
    wanted = pattern.split(".")
    return len(wanted) == len(labels) and all(
        fnmatch.fnmatchcase(h, p) for h, p in zip(labels, wanted, strict=True)
    )


@functools.lru_cache(maxsize=256)
def _url_pattern(pattern: str) -> tuple[str, str, int | None, str]:
    """`https://*.example.com:8443/api/*` → (scheme glob, host glob, port, path glob)."""
    scheme, sep, rest = pattern.partition("://")
    if not sep:
        scheme, rest = "http*", pattern
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    hostport, path = rest[:cut], rest[cut:] or "/"
    host, colon, port_text = hostport.rpartition(":") if hostport.count(":") == 1 else (hostport, "", "")
    port = int(port_text) if colon and port_text.isdigit() else None
    defaults = {"http": 80, "https": 443}
    if port is not None and defaults.get(scheme.lower()) == port:
        port = None
    return scheme.lower(), host.lower() if colon else hostport.lower(), port, path


@functools.lru_cache(maxsize=1024)
def _path_segments(pattern: str, workspace: str, home: str) -> tuple[str, ...] | None:
    """gitignore-like globs: `/abs`, `~/home`, `rel/path` (workspace), bare `name` (any depth).

    The anchored pattern as segments (`**` is any number of segments); None matches everything.
    """
    if pattern in ("*", "**"):
        return None
    if pattern.startswith("//"):
        anchored = pattern[1:]
    elif pattern.startswith("/"):
        anchored = pattern
    elif pattern == "~" or pattern.startswith("~/"):
        anchored = home + pattern[1:]
    elif "/" in pattern.rstrip("/") or pattern.startswith("./"):
        anchored = posixpath.join(workspace, pattern[2:] if pattern.startswith("./") else pattern)
    else:
        anchored = "/**/" + pattern
    anchored = anchored.rstrip("/") if anchored != "/" else anchored
    return tuple(anchored.split("/")) if anchored != "/" else ("", "")


def path_match(segments: tuple[str, ...] | None, path: str) -> bool:
    """Whether a path is matched by (or lies below) the pattern; linear in the path's segments."""
    if segments is None:
        return True
    parts = path.split("/") if path != "/" else ["", ""]
    positions = {0}
    for segment in segments:
        if segment == "**":
            positions = set(range(min(positions), len(parts) + 1))
        elif segment == "" and positions == {0}:
            positions = {1} if parts[0] == "" else set()
        else:
            positions = {j + 1 for j in positions if j < len(parts) and _segment_match(segment, parts[j])}
        if not positions:
            return False
    return True  # a directory pattern also covers what is inside it (`read(~/.ssh)`)


def _segment_match(pattern: str, text: str) -> bool:
    """`*` and `?` within one path segment (`**` inside a segment is `*`); `[` is literal."""
    if "*" not in pattern and "?" not in pattern:
        return pattern == text
    if "?" not in pattern:
        return glob_match(pattern.replace("**", "*"), text)
    p = t = 0
    star, mark = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] in ("?", text[t]) and pattern[p] != "*":
            p, t = p + 1, t + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark, p = p, t, p + 1
        elif star >= 0:
            mark += 1
            p, t = star + 1, mark
        else:
            return False
    return all(ch == "*" for ch in pattern[p:])
