"""Interpreters and shells: inline code they are handed, and shell text they will run."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import replace
from typing import TYPE_CHECKING

from approvals.permissions.shell.words import decode_ansi_c, skip_options

if TYPE_CHECKING:
    from approvals.permissions.shell.invocation import Invocation

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox"})
_CODE_SHELL = re.compile(
    r"""\b(?:system|popen|exec|execSync|spawnSync|check_output|check_call|call|run|Popen|getoutput|"""
    r"""getstatusoutput|shell_exec|passthru)\s{0,16}(?:\(\s{0,16})?(?:\[\s{0,16})?(['"])(.+?)\1"""
)
_CODE_BACKTICKS = re.compile(r"`([^`]+)`")
# Operands that make a program read its code from standard input.
STDIN_NAMES = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})

_INTERPRETER_CODE_FLAGS = {
    "python": "-c",
    "node": "-e",
    "perl": "-e",
    "ruby": "-e",
    "php": "-r",
    "deno": "eval",
    "bun": "-e",
    "lua": "-e",
    "Rscript": "-e",
    "julia": "-e",
}


# Options that take the next word as their value (so it is not the script or the code). Short
# letters count inside a cluster too (`-Wignore`, `-IW ignore`, `bash -eo pipefail`).
_VALUED_LONG = {
    "python": frozenset({"--check-hash-based-pycs"}),
    "node": frozenset({"--require", "--import", "--loader", "--experimental-loader", "--conditions",
                       "--input-type", "--title", "--env-file", "--stack-size", "--inspect-port"}),
    "ruby": frozenset({"--encoding", "--external-encoding", "--internal-encoding", "--enable", "--disable"}),
    "shell": frozenset({"--rcfile", "--init-file"}),
}  # fmt: skip
_VALUED_SHORT = {
    "python": "WXm",
    "node": "rC",
    "perl": "IMm",  # -l, -x and -0 take only an attached value
    "ruby": "IrCEFx",
    "php": "cdz",
    "shell": "oO",
}
# The short letter whose value (the rest of the cluster, else the next word) is code.
_CODE_LETTER = {"perl": "eE", "ruby": "e", "node": "ep", "lua": "e", "php": "rBRFE"}


def interpreter_family(program: str) -> str | None:
    """`python3.12` → python, `nodejs` → node; None when not a known interpreter."""
    for family in ("python", "node", "perl", "ruby", "php", "deno", "bun", "lua", "Rscript", "julia"):
        if program == family or (
            program.startswith(family) and program[len(family) :].strip("0123456789.") == ""
        ):
            return family
    if program in ("nodejs", "pypy", "pypy3", "irb", "tsx", "ts-node"):
        return "node" if program in ("nodejs", "tsx", "ts-node") else "python"
    return None


def with_inline_code(inv: Invocation) -> Invocation:
    """Record the code an interpreter (or awk) is handed inline: `-c`/`-e` text or a here-document.

    Options are walked with their values (`python3 -W ignore -c …`, `perl -I lib -pe …`), so code
    after them is found and judged, not taken for a script file.
    """
    family = interpreter_family(inv.program)
    if inv.program in ("awk", "gawk", "mawk", "nawk"):
        program = next((w.text for w in inv.words[1:] if not w.text.startswith("-")), None)
        return replace(inv, inline_code=program) if "-f" not in inv.argv else inv
    if family is None:
        return inv
    words = inv.words
    i = 1
    while i < len(words):
        text = words[i].text
        following = words[i + 1].text if i + 1 < len(words) else ""
        if text == "--":
            break
        code = _code_option(text, family, following)
        if code is not None:
            return replace(inv, inline_code=code)
        if text in STDIN_NAMES:
            break  # `python /dev/stdin`, `node -`: the script is standard input
        if not text.startswith("-"):
            return inv  # a script operand: the script is read from a file
        i += 1 + _takes_value(text, family)
    if inv.command.stdin in ("heredoc", "herestring"):
        return replace(inv, inline_code=inv.command.heredoc or "")
    return inv


def _code_option(text: str, family: str, following: str) -> str | None:
    """The code option word `text` hands over (its rest, else the next word), or None."""
    flag = _INTERPRETER_CODE_FLAGS.get(family)
    if flag and (
        text == flag
        or text in ("--eval", "-p", "--print", "-E", "--command")
        or (text.startswith(flag) and flag != "eval")
    ):
        return text[len(flag) :] if len(text) > len(flag) and text.startswith(flag) else following
    if not text.startswith("-") or text.startswith("--") or len(text) < 3:
        return None
    # A cluster: `python3 -Ic …`, `perl -pe …`, `ruby -ne …`; a valued letter first ends it (`-Ifoo`).
    letters = "c" if family == "python" else _CODE_LETTER.get(family, "")
    valued = _VALUED_SHORT.get(family, "")
    for at, ch in enumerate(text[1:], start=1):
        if ch in valued:
            return None
        if ch in letters:
            return text[at + 1 :] or following
    return None


def reads_code_from_pipe(inv: Invocation) -> bool:
    """`… | sh`, `… | python3`: the program text arrives at run time."""
    if inv.command.stdin != "pipe" or inv.inline_code is not None:
        return False
    if inv.program not in SHELLS and interpreter_family(inv.program) is None:
        return False
    operands = [w.text for w in inv.words[1:] if not w.text.startswith(("-", "+"))]
    script_flag = inv.program in SHELLS and any(
        w.text.startswith("-") and "c" in w.text[1:] and not w.text.startswith("--") for w in inv.words[1:]
    )
    return not script_flag and (not operands or operands[0] in STDIN_NAMES)


def nested_shell_text(inv: Invocation) -> str | None:
    """Shell text an invocation runs: `bash -c '…'`, `eval …`, `su -c`, `watch …`, a here-doc to sh."""
    program, words = inv.program, inv.words
    if program in SHELLS:
        return _shell_text(inv)
    if inv.inline_code:
        # Shell strings handed to system()/exec()/backticks inside interpreter code.
        found = [m.group(2) for m in _CODE_SHELL.finditer(inv.inline_code)]
        found += _CODE_BACKTICKS.findall(inv.inline_code)
        return "\n".join(found) if found else None
    if program == "eval":
        return " ".join(w.text for w in words[1:])
    if program == "git":
        return git_shell_text(inv)
    if program in ("source", ".") and len(words) > 1 and words[1].text in STDIN_NAMES:
        # `source /dev/stdin <<'EOF'`: the here-document is the script.
        return inv.command.heredoc if inv.command.stdin in ("heredoc", "herestring") else None
    if program == "trap" and len(words) > 2 and not words[1].text.startswith("-"):
        return words[1].text
    if program in ("su", "runuser", "flock"):
        for i, word in enumerate(words[1:], start=1):
            if word.text in ("-c", "--command") and i + 1 < len(words):
                return words[i + 1].text
        return None
    if program == "watch":
        # Only these take a value (`-d`, `-g`, `-x` do not: `watch -d rm …` runs rm).
        index = skip_options(words, 1, frozenset({"-n", "--interval", "-q", "--equexit"}), 0)
        return " ".join(w.text for w in words[index:])
    return None


def _takes_value(text: str, family: str) -> int:
    """1 when option word `text` takes the next word as its value (`-W ignore`, `-o xtrace`)."""
    if text.startswith("--"):
        return 1 if "=" not in text and text in _VALUED_LONG.get(family, frozenset()) else 0
    short = _VALUED_SHORT.get(family, "")
    # The value is the rest of the cluster when there is one: only a valued letter last takes a word.
    return 1 if len(text) > 1 and text[-1] in short and all(ch not in short for ch in text[1:-1]) else 0


def _shell_text(inv: Invocation) -> str | None:
    """The command string of `sh -c …`, after any options and their values.

    `bash -o x -c '…'`, `bash -c -e '…'`: the string is the first operand after the options,
    wherever `-c` is among them.
    """
    words = inv.words
    command_flag = False
    i = 1
    while i < len(words):
        text = words[i].text
        if text == "--":
            i += 1
            break
        if text.startswith(("-", "+")) and len(text) > 1 and not text.startswith("--") and "c" in text[1:]:
            command_flag = True
        if text in STDIN_NAMES and not command_flag:
            break  # `bash /dev/stdin`, `sh -`: the script comes from standard input
        if not text.startswith(("-", "+")) or text in STDIN_NAMES:
            break
        i += 1 + _takes_value(text, "shell")
    if command_flag:
        return words[i].text if i < len(words) else ""
    if i < len(words) and words[i].text not in STDIN_NAMES:
        return None  # a script operand: the script is read from a file
    if inv.command.stdin in ("heredoc", "herestring"):
        return inv.command.heredoc or ""
    upstream = inv.command.upstream
    if inv.command.stdin == "pipe" and upstream and posixpath.basename(upstream[0]) in ("echo", "printf"):
        # `echo 'rm -rf /' | sh`: the text is right there, so judge it (still an ask at least).
        text = " ".join(a for a in upstream[1:] if not a.startswith("-"))
        escapes = upstream[0].endswith("printf") or any(a.startswith("-") and "e" in a for a in upstream[1:])
        return decode_ansi_c(text) if escapes else text
    return None


# git options whose value git runs as a shell command (`rebase -x`, `difftool -x`, `grep -O`).
_GIT_COMMAND_OPTIONS = {
    "rebase": ("-x", "--exec"),
    "difftool": ("-x", "--extcmd"),
    "grep": ("-O", "--open-files-in-pager"),
}


def git_shell_text(inv: Invocation) -> str | None:
    """What git runs through the shell: `submodule foreach CMD`, `bisect run CMD`, `rebase -x CMD`…."""
    argv, words = inv.argv, inv.words
    for verb, marker in (("submodule", "foreach"), ("bisect", "run")):
        if verb in argv and marker in argv[argv.index(verb) :]:
            index = argv.index(marker, argv.index(verb)) + 1
            while index < len(words) and words[index].text.startswith("-"):
                index += 1
            if verb == "bisect":
                # `bisect run` executes an argv (no shell): keep each word whole.
                return " ".join(shlex.quote(w.text) for w in words[index:])
            return " ".join(w.text for w in words[index:])
    found: list[str] = []
    for sub, options in _GIT_COMMAND_OPTIONS.items():
        if sub not in argv:
            continue
        for i, arg in enumerate(argv[argv.index(sub) + 1 :], start=argv.index(sub) + 1):
            if arg in options and i + 1 < len(argv):
                found.append(argv[i + 1])
            elif arg.startswith(options[1] + "="):
                found.append(arg.split("=", 1)[1])
            elif arg.startswith(options[0]) and len(arg) > 2 and not arg.startswith("--"):
                found.append(arg[2:])
    return "\n".join(found) if found else None
