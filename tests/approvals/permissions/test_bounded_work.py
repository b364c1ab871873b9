"""Engine v2, round 2: every expansion is bounded by WORK, and a truncated one is never an allow.

Brace expansion, sequences, nested `-c` text, stored values evaluated as code and CDPATH places
spend steps of one per-judgment budget (`budget.spend`); past a cap the decision is a deny that
says why ("too complex to judge"), never a judgment of the variants that happened to fit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, PermissionConfig, PermissionEngine, load_rules
from approvals.permissions.budget import MAX_WORK, TooComplex, deadline, work_spent
from approvals.permissions.shell.words import MAX_BRACE_VARIANTS, brace_variants
from tests.approvals.permissions.engines import engine as _engine


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ws")


def _groups(n: int, alternatives: str = "a,b") -> str:
    return ("{" + alternatives + "}") * n


TOO_COMPLEX = [
    "echo " + _groups(40),
    "rm -rf " + _groups(40),
    "rm -rf /" + _groups(11) + "etc",
    "cat " + _groups(20, "a,b,c"),
    "cp " + _groups(12) + " /tmp",
    "touch " + " ".join(_groups(6) for _ in range(20)),
    "rm -rf {1..99999999}",
    "rm -rf /x{0..2000}",
    "cat /etc/{1..5000}",
    "rm -rf {a..z}{a..z}{a..z}",
    "rm -rf /{" + ",".join(f"d{i}" for i in range(1100)) + ",etc}",
    "rm -rf {{{{{{{{{{{{a,b},c}{d,e}},f}{g,h}},i}{j,k}},l}{m,n}},o}{p,q}},r}{s,t}" + _groups(8),
    "bash -c 'rm -rf " + _groups(14) + "'",
    "sh -c \"sh -c 'cat " + _groups(14) + "'\"",
    "CDPATH=/a:/b:/c:/d:/e:/f:/g:/h:/ cd etc && rm -rf ./*",
    "mkdir " + _groups(11) + "/x",
    "ls /{" + "{a,b}" * 16 + ",etc}",
    "chmod -R 777 " + _groups(15),
    "rm -rf /usr/" + "{0..9}" * 4,
    "echo " + _groups(60) + " > out.txt",
    "rm -rf " + "x" * 4000 + "{a,b}" + "y" * 200,
    "x='a[$(rm -rf ./" + _groups(20) + ")]'; echo $((x))",
    "cd a; " * 40 + "rm -rf ./*",
    "cd a || true; " * 40 + "rm -rf ./*",
    "pushd x; " * 40 + "rm -rf ./*",
    "f=" + _groups(9) + "; rm -rf $f",
    "rm -rf " + " ".join(["{a,b}{c,d}{e,f}"] * 40),
    "parallel rm -rf {} ::: " + " ".join(f"d{i}" for i in range(70)) + " /",
]


@pytest.mark.parametrize("command", TOO_COMPLEX)
@pytest.mark.parametrize("everything", [False, True])
def test_an_expansion_past_its_cap_is_denied_with_a_reason(
    workspace: Path, command: str, everything: bool
) -> None:
    decision = _engine(workspace, "allow-all", everything).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "deny", (command, decision)
    assert "too complex" in decision.reason or decision.layer == "floor", (command, decision.reason)


WITHIN_CAPS = [
    "mkdir -p src/{a,b,c}/{d,e,f}/{g,h,i,j}",
    "touch tests/test_{1..100}.py",
    "cp config.{yaml,yaml.bak}",
    "rm -f build/{a..z}.o",
    "cat src/{main,util}.py",
    "ls {src,tests}/**/*.py",
    "echo {1..200}",
    "mv notes{,.old}",
    "rm -rf out/{x,y}/{1..9}",
    "for i in {1..200}; do echo $i; done",
]


@pytest.mark.parametrize("command", WITHIN_CAPS)
def test_ordinary_brace_lists_in_the_workspace_are_still_allowed(workspace: Path, command: str) -> None:
    decision = _engine(workspace, "allow-all", False).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "allow", (command, decision.reason)
    assert "too complex" not in decision.reason


@pytest.mark.parametrize(
    "command",
    ["rm -rf /{e,}tc", "rm -rf /e{t..t}c", "rm -rf /{usr,{e,}tc}", "rm -rf /" + "{a,b}" * 5 + "{,/../etc}"],
)
def test_a_variant_naming_a_system_directory_is_still_found(workspace: Path, command: str) -> None:
    decision = _engine(workspace, "allow-all", True).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "deny"
    assert decision.layer == "floor", decision.reason


def test_brace_variants_refuses_rather_than_truncates() -> None:
    assert brace_variants("{a,b}{c,d}") == ["ac", "ad", "bc", "bd"]
    assert brace_variants("x{1..3}") == ["x1", "x2", "x3"]
    for text in (_groups(11), "{1..99999999}", "{" + ",".join(map(str, range(2000))) + "}"):
        with pytest.raises(TooComplex):
            brace_variants(text)


_ALTERNATIVE = st.text(alphabet="abc/.", min_size=0, max_size=3)
_GROUP = st.one_of(
    st.lists(_ALTERNATIVE, min_size=2, max_size=5).map(lambda a: "{" + ",".join(a) + "}"),
    st.tuples(st.integers(-(10**9), 10**9), st.integers(-(10**9), 10**9)).map(
        lambda t: f"{{{t[0]}..{t[1]}}}"
    ),
    st.sampled_from(["{a..z}", "{1..99999999}", "{,/etc}", "{x,{y,{z,/etc}}}"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    groups=st.lists(_GROUP, min_size=1, max_size=60),
    verb=st.sampled_from(["rm -rf ", "cat ", "echo ", "cp x ", "bash -c 'rm -rf ", "touch "]),
    danger=st.booleans(),
)
def test_any_brace_word_gets_a_decision_within_the_work_cap(
    workspace: Path, groups: list[str], verb: str, danger: bool
) -> None:
    word = ("/{etc," if danger else "{") + "".join(groups) + ("}" if danger else "")
    command = verb + word + ("'" if verb.startswith("bash") else "")
    engine = _engine(workspace, "allow-all", True)
    decision = engine.evaluate(Action(kind="command", target=command))
    assert decision.resolved in ("allow", "ask", "deny")
    if danger and verb.startswith(("rm", "bash")):
        assert decision.resolved == "deny", (command, decision.reason)
    with deadline(lambda: 0.0, 1.0):
        try:
            brace_variants(word)
        except TooComplex:
            assert "too complex" in decision.reason or decision.resolved == "deny"
        else:
            pass
        assert work_spent() <= MAX_WORK + 4096 + 1
    try:
        variants = brace_variants(word)
    except TooComplex:
        return
    assert len(variants) <= MAX_BRACE_VARIANTS


_LONG_BENIGN = [
    "git commit -m '" + "fix: a; b | c && d\n" * 700 + "'",
    "curl -s -d '" + '{"key":"value","n":[1,2,3]},' * 500 + "' https://api.example.com/x",
    "cat > notes.md <<'EOF'\n" + "word word word; a | b\n" * 700 + "EOF",
    'echo "' + "a b c d " * 1500 + '"',
    "python3 -c '" + "print(1); " * 1500 + "'",
    "# " + "comment words here " * 600 + "\nls",
]


@pytest.mark.parametrize("command", _LONG_BENIGN)
def test_long_text_whose_bulk_is_quoted_is_not_refused_before_parsing(command: str) -> None:
    from approvals.permissions.shell.parse import parse_shell

    assert len(command) > 2048
    assert parse_shell(command).refused is None, command[:40]


_LONG_REFUSED = [
    " | ".join(["cat"] * 2500),
    " && ".join(["ls"] * 2500),
    "x " * 4500,
    "echo " + "$x" * 3000,
    "echo " + "{a,b}" * 2000,
    "a=b " * 3000 + "ls",
]


@pytest.mark.parametrize("command", _LONG_REFUSED)
def test_text_far_past_a_cap_is_refused_before_the_grammar(command: str) -> None:
    from approvals.permissions.shell.parse import _lexically_too_complex

    assert _lexically_too_complex(command) is not None


_PIECES = st.sampled_from(
    ["{a,b}", "{1..9}", "*", "/", "$x", "$(ls)", "cd a;", "cd ..;", "ln -s / l;", "x=$y;",
     "for i in a b c d; do ", "done;", "bash -c '", "'", '"', "eval ", "IFS=,;", "a,b,c,", "$((x));",
     "x='$(ls)';", "rm -rf ", "cp ", "mv ", "sed -e 'e ls' ", "xargs rm <", "l/", "~", "..", ";", "|",
     "&&", "${x:-/}", "f(){ ", "};", "while true; do ", "$@", "set -- a b c;", "find . -exec rm {} +;",
     "parallel rm ::: ", "CDPATH=/:/a cd b;", " "]
)  # fmt: skip


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_PIECES, min_size=5, max_size=60))
def test_any_composition_of_expansions_gets_a_decision_and_truncation_is_a_deny(
    workspace: Path, pieces: list[str]
) -> None:
    command = "".join(pieces)[:300]
    decision = _engine(workspace, "allow-all", True).evaluate(Action(kind="command", target=command))
    assert decision.resolved in ("allow", "ask", "deny")
    if "too complex" in decision.reason or "took too long" in decision.reason:
        assert decision.resolved == "deny"


def test_the_work_budget_raises_past_its_cap_and_counts_per_judgment() -> None:
    from approvals.permissions.budget import spend

    with deadline(lambda: 0.0, 1.0):
        spend(MAX_WORK - 1, "test")
        assert work_spent() == MAX_WORK - 1
        with pytest.raises(TooComplex, match="needs more than"):
            spend(2, "test")
    with deadline(lambda: 0.0, 1.0):
        assert work_spent() == 0
    assert work_spent() == 0
    spend(10 * MAX_WORK, "outside a judgment")  # no judgment, no budget: a no-op


CDPATH_FLOOR = [
    "CDPATH=/:/b cd etc && rm -rf *",
    "CDPATH=/ cd etc && rm -rf ./*",
    "CDPATH=/usr cd lib && rm -rf *",
    "CDPATH=/ cd etc; rm -rf *",
    "CDPATH=/x:/ cd boot && rm -rf *",
    "CDPATH=/ cd var/lib && rm -rf ./*",
    "CDPATH=/home cd tester && rm -rf *",
    "CDPATH=/ cd usr && chmod -R 777 .",
]


@pytest.mark.parametrize("command", CDPATH_FLOOR)
def test_a_cdpath_landing_stays_a_candidate_directory(workspace: Path, command: str) -> None:
    decision = _engine(workspace, "allow-all", True).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "deny", (command, decision.reason)
    assert decision.layer == "floor", (command, decision.reason)


@pytest.mark.parametrize(
    "text",
    [
        "echo " + "x=(" * 5000,  # tree-sitter error recovery, super-linear: stopped by the parse budget
        "echo " + '"\\' * 8000,  # an unclosed quote after many escaped ones (the lexical pre-count)
        "".join(f"t{i}=$(mktemp); read t{i}; " for i in range(500)),  # the temporary-name scan
    ],
)
def test_adversarial_text_is_never_allowed(tmp_path: Path, text: str) -> None:
    rules = load_rules({"allow": ["command(*)"]})
    engine = PermissionEngine(PermissionConfig(workspace=tmp_path, policy="allow-all", rules=rules))
    decision = engine.evaluate(Action(kind="command", target=text[:16000]))
    assert decision.verdict != "allow", decision


def test_a_temporary_name_set_once_still_counts_as_shown(tmp_path: Path) -> None:
    engine = PermissionEngine(PermissionConfig(workspace=tmp_path))
    shown = engine.evaluate(Action(kind="command", target='t=$(mktemp); echo hi > "$t"; rm -f "$t"'))
    reread = engine.evaluate(Action(kind="command", target='t=$(mktemp); read t; rm -f "$t"'))
    assert "hidden target" not in shown.reason, shown
    assert reread.verdict != "allow", reread
