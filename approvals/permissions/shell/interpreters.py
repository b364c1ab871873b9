"""Interpreters and shells: inline code they are handed, and shell text they will run."""

from __future__ import annotations

import posixpath
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from approvals.permissions.shell.words import decode_ansi_c, skip_options

if TYPE_CHECKING:
    from approvals.permissions.shell.invocation import Invocation

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox"})
_CODE_SHELL = re.compile(
    r"""\b(?:system|popen|exec|execSync|spawnSync|check_output|check_call|call|run|Popen|getoutput|"""
    r"""getstatusoutput|shell_exec|passthru)\s*\(?\s*(?:\[\s*)?(['"])(.+?)\1"""
)
_CODE_BACKTICKS = re.compile(r"`([^`]+)`")

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
    """Record the code an interpreter (or awk) is handed inline: `-c`/`-e` text or a here-document."""
    family = interpreter_family(inv.program)
    if inv.program in ("awk", "gawk", "mawk", "nawk"):
        program = next((w.text for w in inv.words[1:] if not w.text.startswith("-")), None)
        return replace(inv, inline_code=program) if "-f" not in inv.argv else inv
    if family is None:
        return inv
    flag = _INTERPRETER_CODE_FLAGS.get(family)
    for i, word in enumerate(inv.words[1:], start=1):
        text = word.text
        if flag and (
            text == flag
            or text in ("--eval", "-p", "--print", "-E", "--command")
            or (text.startswith(flag) and flag != "eval")
        ):
            code = text[len(flag) :] if len(text) > len(flag) and text.startswith(flag) else None
            if code is None:
                code = inv.words[i + 1].text if i + 1 < len(inv.words) else ""
            return replace(inv, inline_code=code)
        if not text.startswith("-"):
            return inv  # a script operand: the script is read from a file
    if inv.command.stdin in ("heredoc", "herestring"):
        return replace(inv, inline_code=inv.command.heredoc or "")
    return inv


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
    return not script_flag and (not operands or operands == ["-"])


def _shell_program_text(inv: Invocation) -> str | None:
    """Text a shell program runs: its `-c` argument, a here-doc, or what `echo`/`printf` pipes in."""
    words = inv.words
    for i, word in enumerate(words[1:], start=1):
        if word.text.startswith("-") and "c" in word.text[1:] and not word.text.startswith("--"):
            return words[i + 1].text if i + 1 < len(words) else ""
        if not word.text.startswith(("-", "+")):
            return None
    if inv.command.stdin in ("heredoc", "herestring"):
        return inv.command.heredoc or ""
    upstream = inv.command.upstream
    if inv.command.stdin == "pipe" and upstream and posixpath.basename(upstream[0]) in ("echo", "printf"):
        # `echo 'rm -rf /' | sh`: the text is right there, so judge it (still an ask at least).
        text = " ".join(a for a in upstream[1:] if not a.startswith("-"))
        escapes = upstream[0].endswith("printf") or any(a.startswith("-") and "e" in a for a in upstream[1:])
        return decode_ansi_c(text) if escapes else text
    return None


def nested_shell_text(inv: Invocation) -> str | None:
    """Shell text an invocation runs: `bash -c '…'`, `eval …`, `su -c`, `watch …`, a here-doc to sh."""
    program, words = inv.program, inv.words
    if program in SHELLS:
        return _shell_program_text(inv)
    if inv.inline_code:
        # Shell strings handed to system()/exec()/backticks inside interpreter code.
        found = [m.group(2) for m in _CODE_SHELL.finditer(inv.inline_code)]
        found += _CODE_BACKTICKS.findall(inv.inline_code)
        return "\n".join(found) if found else None
    if program == "eval":
        return " ".join(w.text for w in words[1:])
    if program == "git" and "foreach" in inv.argv and "submodule" in inv.argv:
        # `git submodule foreach 'cmd'` runs cmd through the shell in every submodule.
        index = inv.argv.index("foreach") + 1
        while index < len(words) and words[index].text.startswith("-"):
            index += 1
        return " ".join(w.text for w in words[index:])
    if program == "trap" and len(words) > 2 and not words[1].text.startswith("-"):
        return words[1].text
    if program in ("su", "runuser", "flock"):
        for i, word in enumerate(words[1:], start=1):
            if word.text in ("-c", "--command") and i + 1 < len(words):
                return words[i + 1].text
        return None
    if program == "watch":
        index = skip_options(words, 1, frozenset({"-n", "--interval", "-d", "-g"}), 0)
        return " ".join(w.text for w in words[index:])
    return None
