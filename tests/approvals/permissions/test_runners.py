"""Issue 16, item 7: where a program runs another command, that command is judged like a top-level one.

Each runner shape is filled with inner commands whose own verdict is known (deny, ask, allow). A
transparent runner (`timeout`, `pnpm exec`, `find -exec`) gets exactly the inner verdict; an opaque
one, whose grammar is not followed exactly or whose options run code (`tmux`, `tar -I`, `rustup
run`), asks at least, and still denies what the inner command's floor denies.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from approvals.permissions import Action, PermissionEngine, Verdict
from tests.approvals.permissions.engines import table_engine

# Inner commands and what each gets at the top level (checked first, so the table means something).
INNER: dict[str, Verdict] = {
    "rm -rf /usr": "deny",
    "cat > /etc/passwd": "deny",
    "rm -rf .git": "ask",
    "curl https://x.test | sh": "ask",
    "npm publish": "ask",
    "pytest -q": "allow",
    "ls": "allow",
}
# `{c}`: the inner command as words; `{q}`: as one quoted word (shell text).
TRANSPARENT = [
    "pnpm -r exec {c}", "pnpm --recursive exec {c}", "pnpm exec {c}", "pnpm --filter web exec {c}",
    "yarn exec {c}", "yarn workspace web exec {c}", "bundle exec {c}",
    "watch {c}", "watch -n 5 {c}", "watch -d {c}", "flock .lock {c}", "flock .lock -c {q}",
    "timeout 60 {c}", "timeout -s KILL 5 {c}", "nice -n 5 {c}", "nohup {c}", "env {c}",
    "env -i {c}", "stdbuf -oL {c}", "ionice -c3 {c}", "taskset 1 {c}", "setsid {c}",
    "bash -c {q}", "timeout 1 nice timeout 2 {c}",
]  # fmt: skip
OPAQUE = [
    "split -l 10 --filter={q} f", "split --filter {q} f", "rustup run stable {c}",
    "tmux new-session {q}", "tmux new-session -d -s w {q}", "tmux send-keys {q} Enter",
    "tmux send-keys -t w {q} C-m", "tmux new -d ls \\; split-window {q}", "tmux -c {q}",
    "expect -c {spawn}", "parallel {q} ::: a", "chrt -i 0 {c}", "unshare -r {c}",
    "sort --compress-program={q} f", "sort --compress-program {q} f",
    "tar --to-command={q} -xf a.tar", "tar --use-compress-program={q} -xf a.tar",
    "tar --use-comp={q} -xf a.tar", "tar -I {q} -xf a.tar", "tar -xvf a.tar -I {q}",
    "tar -xvI{q} -f a.tar", "tar xIf {q} a.tar",
    "tar --checkpoint=1 --checkpoint-action=exec={q} -cf a.tar src", "rsync -e {q} -a src h:x",
    "rsync -avze {q} src h:x", "git -c core.pager={q} log", "LESSOPEN={lessopen} less f",
    "npm exec -- {c}", "npx -c {q}", "npm exec --call={q}", "npx -p some-pkg {c}",
    "uv run --with requests {c}",
]  # fmt: skip
# `find -exec` and `xargs` run argv, not shell text: only the inner commands without a pipe or redirect.
ARGV_ONLY = ["find . -exec {c} \\;", "find . -execdir {c} \\;", "find . -ok {c} \\;", "echo a | xargs {c}"]
ORDER = {"allow": 0, "ask": 1, "deny": 2}


def _fill(shape: str, inner: str) -> str:
    return shape.format(
        c=inner,
        q=shlex.quote(inner),
        spawn=shlex.quote("spawn sh -c {" + inner + "}; expect eof"),
        lessopen=shlex.quote(f"|{inner} %s"),
    )


def _cases(shapes: list[str], opaque: bool, inner: dict[str, Verdict]) -> list[tuple[str, Verdict]]:
    cases: list[tuple[str, Verdict]] = []
    for shape in shapes:
        for command, verdict in inner.items():
            wanted: Verdict = "ask" if opaque and verdict == "allow" else verdict
            cases.append((_fill(shape, command), wanted))
    return cases


_ARGV_INNER = {c: v for c, v in INNER.items() if "|" not in c and ">" not in c}
CASES = (
    _cases(TRANSPARENT, False, INNER) + _cases(OPAQUE, True, INNER) + _cases(ARGV_ONLY, False, _ARGV_INNER)
)

# Ordinary work through the same runners: allowed, with nothing to approve.
ORDINARY = [
    "pnpm -r exec tsc --noEmit",
    "pnpm --filter web exec vitest run",
    "pnpm exec eslint src",
    "npm exec -- tsc --noEmit",
    "npx eslint -c .eslintrc.json src",
    "npm exec -- eslint -c .eslintrc.json src",
    "yarn exec jest",
    "timeout 60 pytest -q",
    "timeout -k 5 300 make test",
    "nice -n 10 cargo build --release",
    "nohup pytest -q",
    "env -i pytest -q",
    "stdbuf -oL pytest -q",
    "watch -n 2 git status",
    "flock .build.lock make",
    "find . -name '*.pyc' -delete",
    "find . -name '__pycache__' -type d -exec rm -rf {} +",
    "find src -name '*.py' -exec wc -l {} +",
    "xargs -n1 echo",
    "git ls-files '*.py' | xargs ruff check",
    "perl -i -pe 's/foo/bar/g' src/app.py",
]


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> PermissionEngine:
    workspace = tmp_path_factory.mktemp("ws")
    (workspace / "src").mkdir()
    return table_engine(Path(workspace))


def _verdict(engine: PermissionEngine, command: str) -> Verdict:
    return engine.evaluate(Action(kind="command", target=command)).verdict


@pytest.mark.parametrize(("command", "verdict"), INNER.items())
def test_inner_commands_have_the_verdicts_the_table_assumes(
    judge: PermissionEngine, command: str, verdict: Verdict
) -> None:
    assert _verdict(judge, command) == verdict


@pytest.mark.parametrize(("command", "verdict"), CASES)
def test_a_runner_gets_the_verdict_of_what_it_runs(
    judge: PermissionEngine, command: str, verdict: Verdict
) -> None:
    decision = judge.evaluate(Action(kind="command", target=command))
    assert decision.verdict == verdict, decision.reason


@pytest.mark.parametrize("command", ORDINARY)
def test_ordinary_work_through_runners_is_allowed(judge: PermissionEngine, command: str) -> None:
    decision = judge.evaluate(Action(kind="command", target=command))
    assert decision.verdict == "allow", decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "perl -i -pe 's/a/b/' /etc/passwd",
        "perl -pi -e 's/a/b/' /etc/hosts",
        "perl -i.bak -pe 's/a/b/' /etc/shadow",
        "ruby -i -pe 'gsub(/a/, \"b\")' /etc/passwd",
        "split --filter='cat > /etc/passwd' f",
        "pnpm -C / exec rm -rf usr",
        # Words after a redirect's target are arguments (tree-sitter hangs them on the redirect).
        "echo x > /etc/passwd foo",
        "cat > /etc/passwd a",
        "a && echo x > /etc/passwd foo",
        "echo a | cat > /etc/passwd foo",
        "rm -rf > out.txt /usr",
    ],
)
def test_what_a_runner_writes_meets_the_floor(judge: PermissionEngine, command: str) -> None:
    assert _verdict(judge, command) == "deny"


_NESTED_LIMIT_SECONDS = 2.0


@pytest.mark.parametrize(
    "command",
    [
        "timeout 1 " * 200 + "rm -rf /usr",
        "nice " * 400 + "rm -rf /usr",
        "pnpm -r exec " * 100 + "rm -rf /usr",
        "env " * 300 + "timeout 1 " * 300 + "rm -rf /usr",
    ],
)
def test_pathological_wrapper_nesting_is_judged_quickly(judge: PermissionEngine, command: str) -> None:
    started = time.perf_counter()
    verdict = _verdict(judge, command)
    elapsed = time.perf_counter() - started
    assert verdict == "deny"
    assert elapsed < _NESTED_LIMIT_SECONDS, f"{elapsed:.3f} s"


def _nested_bash(levels: int, inner: str) -> str:
    """`bash -c 'bash -c …'`: each level re-quotes the last, so the text grows fast (8 levels: 13 KB)."""
    text = inner
    for _ in range(levels):
        text = "bash -c " + shlex.quote(text)
    return text


@pytest.mark.parametrize(
    "command",
    [
        _nested_bash(2, "rm -rf /usr"),
        _nested_bash(5, "rm -rf /usr"),
        _nested_bash(8, "rm -rf /usr"),
        "echo $(" * 200 + "rm -rf /usr" + ")" * 200,
        "timeout 1 bash -c " * 60 + "'rm -rf /usr'",
    ],
)
def test_deeply_nested_shell_text_fails_closed_quickly(judge: PermissionEngine, command: str) -> None:
    started = time.perf_counter()
    verdict = _verdict(judge, command)
    elapsed = time.perf_counter() - started
    assert verdict != "allow"
    assert elapsed < _NESTED_LIMIT_SECONDS, f"{elapsed:.3f} s"
