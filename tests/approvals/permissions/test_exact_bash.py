"""Engine v2, principles 6 and 7: judge what bash runs, refuse what cannot be shown, bounded time."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, PermissionConfig, PermissionEngine, load_rules
from approvals.permissions.model.decisions import RISK_ORDER, VERDICT_ORDER
from approvals.permissions.shell.parse import MAX_SHELL_CHARS

HOME = Path("/home/tester")
_RULES = load_rules({"allow": ["command(*)", "read(**)", "write(**)", "fetch(*)"]})


def _engine(workspace: Path, **kw: object) -> PermissionEngine:
    return PermissionEngine(
        PermissionConfig(workspace=workspace, home=HOME, policy="allow-all", rules=_RULES, **kw)  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("kind", "target", "why"),
    [
        ("command", "ls \ud800", "lone surrogate"),
        ("command", "cat \udcff\udcfe", "lone surrogate"),  # invalid UTF-8 decoded with surrogateescape
        ("read", "src/\udc80.py", "lone surrogate"),
        ("write", "a\udfffb", "lone surrogate"),
        ("fetch", "https://example.com/\ud83d", "lone surrogate"),
        ("command", "echo a\x00b", "NUL"),
        ("command", "ls # \u202e fdp.exe", "bidirectional"),
        ("write", "src/\u2066x.py", "bidirectional"),
        ("command", "x" * (MAX_SHELL_CHARS + 1), "too long to judge"),
        ("read", "a/" * 2100, "too long to judge"),
        ("fetch", "https://example.com/" + "a" * 5000, "too long to judge"),
        ("command", "( " * 200 + "ls" + ")" * 200, "too complex"),
        ("command", "echo " + "$(" * 100 + "ls" + ")" * 100, "too complex"),
    ],
)
def test_text_that_cannot_be_judged_faithfully_is_denied(
    tmp_path: Path, kind: str, target: str, why: str
) -> None:
    decision = _engine(tmp_path).evaluate(Action(kind=kind, target=target))  # type: ignore[arg-type]
    # Text past a bound (size, structure) asks a human; automation (allow-all here) never allows it.
    bounded = why in ("too long to judge", "too complex")
    assert decision.verdict == ("ask" if bounded else "deny"), decision
    assert decision.resolved == "deny", decision
    assert why in decision.reason, decision


@pytest.mark.parametrize(
    "text",
    [
        "ls && echo ok", "git status\n", "echo 'ünïcödé ✓'", "printf 'a\\tb'", "echo שלום",
        "grep -rn \"$(git rev-parse --show-toplevel)\" .", "x=$((1+2)); echo $x",
    ],
)  # fmt: skip
def test_ordinary_text_is_not_refused(tmp_path: Path, text: str) -> None:
    decision = _engine(tmp_path).evaluate(Action(kind="command", target=text))
    assert decision.layer != "policy" or decision.verdict != "deny", decision


_ALL_TEXT = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=200)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["command", "read", "write", "fetch", "tool"]), target=_ALL_TEXT)
def test_every_action_gets_a_decision(tmp_path: Path, kind: str, target: str) -> None:
    """Any text (surrogates included) through every action kind: no exception, a valid decision."""
    decision = _engine(tmp_path).evaluate(Action(kind=kind, target=target))  # type: ignore[arg-type]
    assert decision.verdict in VERDICT_ORDER
    assert decision.resolved in VERDICT_ORDER
    assert decision.risk in RISK_ORDER
    assert "could not judge" not in decision.reason, (target, decision)


def _pathological() -> list[str]:
    n = MAX_SHELL_CHARS
    shapes = [
        "$(" * 40 + "ls" + ")" * 40, "(" * 60 + "ls" + ")" * 60, "{ " * 60 + "ls;" + " }" * 60,
        " && ".join(["ls"] * (n // 6)), " | ".join(["cat"] * (n // 6)), "echo '" + "a" * (n - 10) + "'",
        "echo " + "\\" * (n - 6), "".join(f"cat <<E{i}\nx\nE{i}\n" for i in range(n // 16)),
        "echo {" + ",".join(str(i) for i in range(n // 6)) + "}", "echo " + "{a,b}" * (n // 6),
        "x" * n, "echo " + "$x" * (n // 3), "a=" + "'" * (n - 2), "echo " + '"' * (n - 6),
        "rm -rf " + "/a" * (n // 3), ":(){ :|:& };:" * (n // 14), "f(){ " * (n // 6),
        "echo " + "{," * (n // 3), "while true; do " * (n // 16), "$((" * (n // 4),
        "python -c '" + "rmtree(" * (n // 8) + "'", "echo ${x:-" * (n // 9),
        # shapes that made backtracking regular expressions take seconds
        "sqlite3 db.sqlite '" + "\n" * (n - 20) + "'", "python3 -c 'system" + " " * (n - 30) + "'",
        "chmod " + "u" * (n - 10) + " f", "perl -e 'fork" + " " * (n - 20) + "'", "echo ${" * (n // 2),
        "x=1; " + "${x" * (n // 3), "python3 -c '" + "x = '/' ; " * (n // 12) + "'",
    ]  # fmt: skip
    return [s[:n] for s in shapes]


@pytest.mark.parametrize("text", _pathological(), ids=lambda t: t[:24])
def test_pathological_shapes_up_to_the_limit_get_a_decision(tmp_path: Path, text: str) -> None:
    decision = _engine(tmp_path, budget_seconds=5.0).evaluate(Action(kind="command", target=text))
    assert decision.verdict in VERDICT_ORDER
    assert "could not judge" not in decision.reason, decision


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.lists(
        st.sampled_from(
            [
                "$(",
                ")",
                "(",
                "{ ",
                " }",
                "&&",
                "|",
                "'",
                '"',
                "\\",
                "<<E\n",
                "\nE\n",
                "{a,b}",
                "`",
                "rm -rf /",
                " ",
                ";",
                "$((",
                "))",
                "${x:-",
                "}",
                "\n",
                "*",
            ]
        ),
        max_size=400,
    ),
    repeat=st.integers(1, 40),
)
def test_random_pathological_text_gets_a_decision(tmp_path: Path, parts: list[str], repeat: int) -> None:
    text = ("".join(parts) * repeat)[:MAX_SHELL_CHARS]
    decision = _engine(tmp_path, budget_seconds=5.0).evaluate(Action(kind="command", target=text))
    assert decision.verdict in VERDICT_ORDER
    assert "could not judge" not in decision.reason, (text[:200], decision)


def test_a_judgment_past_its_deadline_fails_closed(tmp_path: Path) -> None:
    ticks = itertools.count()
    engine = _engine(tmp_path, budget_seconds=5.0, clock=lambda: float(next(ticks)))
    decision = engine.evaluate(Action(kind="command", target="ls; " * 20 + "echo fresh-text-no-cache-1"))
    assert (decision.verdict, decision.resolved) == ("ask", "deny")
    assert "took too long" in decision.reason


async def test_evaluate_async_runs_off_the_event_loop(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    decisions = await asyncio.gather(
        *(engine.evaluate_async(Action(kind="command", target=f"rm -rf / # {i}")) for i in range(8)),
        engine.evaluate_async(Action(kind="command", target="ls")),
    )
    assert [d.layer for d in decisions[:8]] == ["floor"] * 8
    assert decisions[-1].resolved == "allow"


_EXACT = yaml.safe_load((Path(__file__).parent / "catalogue" / "exact_bash.yaml").read_text())


@pytest.mark.parametrize("text", _EXACT["floor"], ids=lambda t: t[:40])
def test_spellings_bash_resolves_reach_the_floor(tmp_path: Path, text: str) -> None:
    decision = _engine(tmp_path).evaluate(Action(kind="command", target=text))
    assert (decision.verdict, decision.resolved, decision.layer) == ("deny", "deny", "floor"), (
        text,
        decision,
    )


@pytest.mark.parametrize("text", _EXACT["unsafe_under_automation"], ids=lambda t: t[:40])
def test_hidden_programs_are_never_allowed_by_automation(tmp_path: Path, text: str) -> None:
    for policy in ("allow-all", "risk-based"):
        engine = PermissionEngine(
            PermissionConfig(workspace=tmp_path, home=HOME, policy=policy, rules=_RULES)
        )
        decision = engine.evaluate(Action(kind="command", target=text))
        assert decision.resolved == "deny", (text, policy, decision)
    human = PermissionEngine(PermissionConfig(workspace=tmp_path, home=HOME)).evaluate(
        Action(kind="command", target=text)
    )
    assert human.verdict != "allow", human
