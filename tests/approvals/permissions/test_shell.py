"""Shell analysis: every simple command is found, de-quoted, unwrapped; odd shapes become problems."""

from __future__ import annotations

import pytest

from approvals.permissions.shell.invocation import expand
from approvals.permissions.shell.parse import MAX_SHELL_CHARS, parse_shell
from approvals.permissions.shell.words import UNKNOWN


def _argvs(text: str) -> list[tuple[str, ...]]:
    return [inv.argv for inv in expand(text).invocations]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ls -la", [("ls", "-la")]),
        ("a && b || c; d & e | f", [("a",), ("b",), ("c",), ("d",), ("e",), ("f",)]),
        ("a\nb", [("a",), ("b",)]),
        ("(a; b)", [("a",), ("b",)]),
        ("{ a; b; }", [("a",), ("b",)]),
        ("echo $(a x)", [("a", "x"), ("echo", UNKNOWN)]),
        ("echo `a`", [("a",), ("echo", UNKNOWN)]),
        ("diff <(a) <(b)", [("a",), ("b",), ("diff", "/dev/fd/63", "/dev/fd/63")]),
        ("if a; then b; else c; fi", [("a",), ("b",), ("c",)]),
        ("for i in 1 2; do a $i; done", [("a", "1"), ("a", "2")]),
        ('for f in *.py; do a "$f"; done', [("a", "*.py")]),
        ("for f in $(git ls-files); do a $f; done", [("git", "ls-files"), ("a", UNKNOWN)]),
        ("for i in $X 2; do a $i; done", [("a", UNKNOWN)]),
        ("for i in {a,b}; do a $i; done", [("a", UNKNOWN)]),
        ("for i in 1 2; do i=/; a $i; done", [("a", "/"), ("a", "/")]),
        ("for i in 1; do :; done; for i in 2; do a $i; done", [(":",), ("a", "2")]),
        ("for i in 1; do a; done; b $i", [("a",), ("b", UNKNOWN)]),
        ("while a; do b; done", [("a",), ("b",)]),
        ("case x in y) a;; esac", [("a",)]),
        ("! a", [("a",)]),
        ("x=$(a)", [("a",)]),
        ('r"m" \'x\' "y z"', [("rm", "x", "y z")]),
        ("$'\\x72m' x", [("rm", "x")]),
        ("/usr/bin/git status", [("git", "status")]),
        ("A=1 B=2 make", [("make",)]),
        ("timeout 5 nice -n 3 nohup env X=1 command stdbuf -o0 ls", [("ls",)]),
        ("time -p make", [("make",)]),
        ("bash -c 'a; b'", [("bash", "-c", "a; b"), ("a",), ("b",)]),
        ("sh -c \"sh -c 'a'\"", [("sh", "-c", "sh -c 'a'"), ("sh", "-c", "a"), ("a",)]),
        ("eval 'a b'", [("eval", "a b"), ("a", "b")]),
        ("xargs -n1 rm", [("rm",)]),
        ("find . -exec rm {} \\;", [("find", ".", "-exec", "rm", "{}", ";"), ("rm", "{}")]),
        ("sudo -u bob ls", [("sudo", "-u", "bob", "ls"), ("ls",)]),
        ("bash <<EOF\na\nEOF", [("bash",), ("a",)]),
        ("sh <<< 'a'", [("sh",), ("a",)]),
        ("echo 'a' | sh", [("echo", "a"), ("sh",), ("a",)]),
        ('rm -rf "$HOME"', [("rm", "-rf", "~")]),
        ("cat ${HOME}/x", [("cat", "~/x")]),
    ],
)
def test_invocations(text: str, expected: list[tuple[str, ...]]) -> None:
    assert _argvs(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("$CMD x", "computed at run time"),
        ("$(echo rm) -rf x", "computed at run time"),
        ("c\\u\\r\\l x", "obfuscated"),
        ("$'\\x63url' x", "obfuscated"),
        ("сurl x", "unusual characters"),
        ('eval "$X"', "eval"),
        ('bash -c "$X"', "computed at run time"),
        ("f() { a; }; f", "function"),
        ("echo ok | sh", "pipe"),
        ("curl x | python3", "pipe"),
        ("echo 'unterminated", "parse"),
        ("a |& b", "|&"),
        ("echo \U0001f600", "Multilingual"),
        ("x" * (MAX_SHELL_CHARS + 1), "too long to judge"),
        ("timeout 5 if a; then b; fi", "keyword"),
    ],
)
def test_not_plain_words_are_problems(text: str, problem: str) -> None:
    problems = " ".join(expand(text).problems)
    assert problem in problems, problems


@pytest.mark.parametrize(
    "text",
    ["ls -la", "git commit -m 'rm -rf /'", "cat a | sort | uniq -c", "make && pytest -q", "echo $HOME"],
)
def test_plain_commands_have_no_problems(text: str) -> None:
    assert expand(text).problems == ()


def test_redirects_and_pipes_are_recorded() -> None:
    script = parse_shell("pytest 2>&1 | tee log.txt > out.txt < in.txt")
    first, second = script.commands
    assert first.redirects[0].target is None  # 2>&1 duplicates a descriptor, it is not a file
    assert second.upstream == ("pytest",)
    assert second.stdin == "file"  # `< in.txt` on the last stage wins over the pipe, as in bash
    assert [(r.op, r.target.text if r.target else None) for r in second.redirects] == [
        (">", "out.txt"),
        ("<", "in.txt"),
    ]


def test_fork_bomb_is_detected() -> None:
    assert parse_shell(":(){ :|:& };:").fork_bomb
    assert not parse_shell("f() { echo hi; }; f").fork_bomb


def test_unbalanced_double_paren_reads_as_subshells_like_bash() -> None:
    assert _argvs("((a; b); c)") == [("a",), ("b",), ("c",)]


def test_characters_beyond_the_bmp_never_crash_the_parser() -> None:
    # Regression: tree-sitter-bash 0.25 segfaulted on `{` + some astral characters (found by fuzzing).
    for code in range(0xA0000, 0xA0000 + 3000, 7):
        parse_shell.__wrapped__("{" + chr(code))


@pytest.mark.parametrize(
    ("text", "argv"),
    [
        ("f=/etc; cat $f/hosts", ("cat", "/etc/hosts")),
        ("f=src; false && f=/etc; cat $f/x", ("cat", UNKNOWN + "/x")),  # set twice: unknown
        ("cat $f; f=/etc", ("cat", UNKNOWN)),  # used before it is set
        ("for f in a; do cat $f; done", ("cat", "a")),  # a loop word: judged per pass
        ("for f in a; do :; done; cat $f", ("cat", UNKNOWN)),  # after the loop: unknown
        ("X=/ cat $X", ("cat", UNKNOWN)),  # a prefix assignment does not change this command's words
    ],
)
def test_script_variables_are_trusted_only_when_set_once(text: str, argv: tuple[str, ...]) -> None:
    assert _argvs(text)[-1] == argv


@pytest.mark.parametrize(
    ("text", "listing"),
    [
        ("wc -l $(git ls-files)", True),
        ("wc -l $(git ls-files '*.py' src)", True),
        ("wc -l `git diff --name-only HEAD~1`", True),
        ("wc -l $(find . -name '*.py')", True),
        ("wc -l $(find src tests -type f -name '*.c' -maxdepth 2)", True),
        ("wc -l $(ls -t logs | head -1)", True),
        ("wc -l $(git ls-files | grep test | sort)", True),
        ("wc -l $(grep -l TODO a.py b.py)", True),
        ("wc -l $(cat list.txt)", False),  # a file's content may name any path
        ("wc -l $(git ls-files :/)", False),  # pathspec magic: the whole repository
        ("wc -l $(git -C .. ls-files)", False),
        ("wc -l $(find . -type f)", False),  # no name filter: `.env` too
        ("wc -l $(find . -name '.env*')", False),
        ("wc -l $(find . -name '*.pem')", False),
        ("wc -l $(find . -name '*.py' -o -name x)", False),
        ("wc -l $(find src -name '*.ts' -not -path '*/node_modules/*')", True),
        ("wc -l $(find . -name '*.py' ! -name 'x.py')", False),
        ("wc -l $(find . -name '*.py' ! \\( -name x \\))", False),
        ("wc -l $(find . \\( -name '*.py' \\))", True),
        ("wc -l $(find -L . -name '*.py')", False),
        ("wc -l $(find . -name '*.py' -exec cat {} +)", False),
        ("wc -l $(find ~ -name '*.py')", False),
        ("wc -l $(find ../x -name '*.py')", False),
        ("wc -l $(ls -l)", False),  # long format shows link targets
        ("wc -l $(ls ~)", False),
        ("wc -l $(grep -rl KEY .)", False),  # recursive grep names hidden files
        ("wc -l $(git ls-files | head -n 1 /etc/passwd)", False),
        ("wc -l $(git ls-files | xargs cat)", False),
        ("wc -l $(git ls-files $X)", False),
        ('wc -l "$(git ls-files)"x', False),
    ],
)
def test_substitutions_that_list_workspace_files(text: str, listing: bool) -> None:
    wc = next(inv for inv in expand(text).invocations if inv.program == "wc")
    assert wc.words[-1].listing is listing


@pytest.mark.parametrize(
    ("text", "chain"),
    [
        ("mkdir -p build && cd build && cmake ..", True),
        ("cd src && ls > out.txt", True),
        ("ls", True),
        ("cd src; ls", False),  # the cd may fail and ls still runs
        ("cd src || ls", False),
        ("cd src && (cd ..; ls)", False),
        ("(cd build && cmake ..)", True),
        ("(cd build && cmake ..); ls ..", False),
        ("(cd build; cmake ..)", False),
        ("cd src && bash -c 'cd ..' && ls", False),
        ("cd src && ls $(cd ..; pwd)", False),
        ("cd src && cat <<EOF\nx\nEOF", False),
    ],
)
def test_only_plain_and_chains_follow_cd_exactly(text: str, chain: bool) -> None:
    assert expand(text).and_chain is chain


@pytest.mark.parametrize(
    ("text", "program", "stdin", "code"),
    [
        ("cat <<EOF | python3\nprint(1)\nEOF", "python3", "heredoc", "print(1)\n"),
        ("cat - <<'EOF' | sh\nls\nEOF", "sh", "heredoc", "ls\n"),
        ("ls && cat <<EOF | bash\nls\nEOF", "bash", "heredoc", "ls\n"),
        ("a | cat <<EOF | bash\nls\nEOF", "bash", "heredoc", "ls\n"),
        ("cat <<< 'print(1)' | python3", "python3", "heredoc", "print(1)"),
        ("cat x.py | python3", "python3", "pipe", None),
        ("cat -n <<EOF | python3\nprint(1)\nEOF", "python3", "pipe", None),
    ],
)
def test_a_literal_here_document_piped_through_cat_reaches_the_next_stage(
    text: str, program: str, stdin: str, code: str | None
) -> None:
    command = next(c for c in parse_shell(text).commands if c.words[0].text == program)
    assert command.stdin == stdin
    assert command.heredoc == code


@pytest.mark.parametrize(
    ("text", "revision"),
    [
        ("git diff $(git merge-base main HEAD)", True),
        ("git diff $(git rev-parse --short HEAD~1)", True),
        ("git log $(git describe --tags --abbrev=0)..HEAD", True),
        ("git diff $(git rev-parse --show-toplevel)", False),  # a path
        ("git diff $(git rev-parse HEAD)/../x", False),
        ("git diff $(cat rev.txt)", False),
        ("git diff $(git rev-parse $X)", False),
    ],
)
def test_substitutions_that_print_a_revision(text: str, revision: bool) -> None:
    diff = next(inv for inv in expand(text).invocations if inv.argv[1] in ("diff", "log"))
    assert diff.words[-1].revision is revision


def test_nested_loops_cannot_multiply_the_work() -> None:
    """Eight nested eight-word loops would be 8**8 passes; past the budget a loop variable is unknown."""
    text = "".join(f"for {v} in 1 2 3 4 5 6 7 8; do " for v in "abcdefgh") + "cat $h" + "; done" * 8
    commands = parse_shell.__wrapped__(text).commands
    assert len(commands) <= 64
    assert any(UNKNOWN in c.words[-1].text for c in commands)
