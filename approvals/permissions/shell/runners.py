"""Programs that run another program, and the shell text they run.

Project runners (`uv run`, `poetry run`, `npx`), the files a wrapper's own options write
(`time -o`), and shell text handed on (`script -c`, `parallel`, `ssh`, sed's `e command`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from typing import TYPE_CHECKING

from approvals.permissions.budget import TooComplex
from approvals.permissions.shell.script import Redirect
from approvals.permissions.shell.words import Word

if TYPE_CHECKING:
    from approvals.permissions.shell.invocation import Invocation

# Project runners that run a local program (`uv run pytest`, `poetry run pytest`, `npx tsc`). Only
# the option spellings here keep them local; any other option (`--with`, `-p pkg`, `--yes`) may
# download code, so the runner is judged as itself (egress).
_RUNNER_OPTIONS: dict[str, frozenset[str]] = {
    "uv": frozenset(
        {"--frozen", "--locked", "--offline", "--no-sync", "-q", "--quiet", "--all-extras", "--no-dev",
         "--dev", "--active", "--no-project"}
    ),
    "poetry": frozenset({"-q", "--quiet", "--no-interaction", "-n"}),
    "npx": frozenset({"--no-install", "--no", "--offline", "--prefer-offline", "-q", "--quiet"}),
    # `bundle exec rspec`, `pnpm exec tsc`, `yarn exec jest`: a program from the project's own bundle.
    "bundle": frozenset(), "pnpm": frozenset(), "yarn": frozenset(),
}  # fmt: skip
# The runner's verb that runs the rest (`uv run …`, `bundle exec …`); npx has none.
_RUNNER_VERB = {"uv": "run", "poetry": "run", "bundle": "exec", "pnpm": "exec", "yarn": "exec"}
# What `npx NAME` runs without a download when the project has it (the names of real packages, so a
# missing one fetches the well-known tool, never an arbitrary name the agent chose).
NPX_LOCAL_TOOLS = frozenset(
    """tsc prettier eslint jest vitest mocha ts-node tsx webpack rollup esbuild stylelint biome playwright
    cypress next vite nx turbo ava""".split()  # noqa: SIM905
)
RUNNERS = frozenset(_RUNNER_OPTIONS)


def runner_rest(name: str, words: tuple[Word, ...]) -> tuple[Word, ...] | None:
    """What `uv run …`, `poetry run …` or `npx …` runs locally; None when it may download code."""
    i = 1
    if name in _RUNNER_VERB:
        if len(words) < 2 or words[1].text != _RUNNER_VERB[name]:
            return None
        i = 2
    options = _RUNNER_OPTIONS[name]
    while i < len(words) and words[i].text.startswith("-"):
        if words[i].text == "--":
            i += 1
            break
        if words[i].text not in options:
            return None
        i += 1
    rest = words[i:]
    if not rest or not all(w.plain for w in words[:i]) or not rest[0].plain:
        return None
    head = rest[0].text
    if name == "npx":
        local_only = any(w.text in ("--no-install", "--no") for w in words[1:i])
        if "@" in head or "/" in head or not (head in NPX_LOCAL_TOOLS or local_only):
            return None  # `npx pkg@1`, `npx some-unknown-pkg`: a download
    if name == "uv" and head.endswith(".py"):
        return (Word(text="python"), *rest)  # `uv run script.py` runs it with the project's python
    return rest


def wrapper_outputs(name: str, options: tuple[Word, ...]) -> tuple[Redirect, ...]:
    """Files a wrapper's own options write (`time -o f`, `time --output=f`), as redirects."""
    if name != "time":
        return ()
    found: list[Redirect] = []
    for i, word in enumerate(options):
        if word.text in ("-o", "--output") and i + 1 < len(options):
            found.append(Redirect(">", options[i + 1]))
        elif word.text.startswith("--output="):
            found.append(Redirect(">", replace(word, text=word.text[len("--output=") :])))
        elif word.text.startswith("-o") and len(word.text) > 2:
            found.append(Redirect(">", replace(word, text=word.text[2:])))
    return tuple(found)


_PARALLEL_VALUED = frozenset(
    """-j --jobs -S --sshlogin -a --arg-file -d --delimiter -I --colsep -n -N --joblog --results
    --tmpdir --workdir -E --timeout --delay --halt --retries --memfree --load --basefile""".split()  # noqa: SIM905
)
_PARALLEL_SEPARATORS = frozenset({":::", "::::", ":::+", "::::+"})
_REPLACEMENTS = ("{}", "{.}", "{/}", "{//}", "{/.}", "{#}", "{%}")


def wrapper_shell_text(inv: Invocation) -> str | None:
    """Shell text a wrapper runs: `script -c`, `sg GROUP [-c] CMD`, `env -S`, `parallel … ::: x`, gdb."""
    words = [w.text for w in inv.words]
    program = inv.program
    if program in ("script", "sg", "env", "gdb"):
        for i, text in enumerate(words[1:], start=1):
            if i + 1 >= len(words):
                break
            cluster = text.startswith("-") and not text.startswith("--") and text.endswith("c")
            if (program in ("script", "sg") and (text == "--command" or cluster)) or (
                program == "env" and text in ("-S", "--split-string")
            ):
                return " ".join([words[i + 1], *(shlex.quote(w) for w in words[i + 2 :])])
            if program == "gdb" and text in ("-ex", "--eval-command", "-iex"):
                value = words[i + 1].strip()
                if value.startswith(("shell ", "!", "pipe ", "|")):
                    return value.lstrip("!|").removeprefix("shell ").removeprefix("pipe ")
        if program == "sg" and len(words) > 2 and not words[2].startswith("-"):
            return " ".join(words[2:])
        if program == "env":
            for text in words[1:]:
                if text.startswith(("--split-string=", "-S")) and len(text) > 2 and text != "-S":
                    return text.split("=", 1)[1] if text.startswith("--") else text[2:]
        return None
    if program == "parallel":
        return _parallel_text(words)
    return _other_shell_text(inv, words)


_GIT_SHELL_KEYS = ("core.pager", "core.editor", "core.sshcommand", "core.fsmonitor", "diff.external",
                   "sequence.editor", "credential.helper", "pager.", "alias.", "gpg.program")  # fmt: skip
_SSH_VALUED = frozenset("-b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w".split())  # noqa: SIM905


def _other_shell_text(inv: Invocation, words: list[str]) -> str | None:
    """Editors' `:!cmd`, git's shell-valued `-c` keys, `at`/`crontab` input, `ssh HOST CMD`."""
    program = inv.program
    if program in ("vim", "vi", "nvim", "ex", "view"):
        found = [w.lstrip(":+").lstrip("!") for w in words[1:] if w.lstrip(":+").startswith("!")]
        found += [words[i + 1].lstrip(":").lstrip("!") for i, w in enumerate(words[:-1])
                  if w in ("-c", "--cmd") and words[i + 1].lstrip(":").startswith("!")]  # fmt: skip
        return "\n".join(found) or None
    if program == "git":
        values = [
            words[i + 1].split("=", 1) for i, w in enumerate(words[:-1]) if w == "-c" and "=" in words[i + 1]
        ]
        found = [v.lstrip("!") for k, v in values if k.lower().startswith(_GIT_SHELL_KEYS)]
        return "\n".join(found) or None
    if program in ("at", "batch", "crontab"):
        text = _stdin_text(inv)
        if text is not None and program == "crontab":
            # Each line is five time fields and a command.
            text = "\n".join(
                " ".join(line.split()[5:]) for line in text.splitlines() if not line.startswith("#")
            )
        return text
    if program in ("sed", "gsed"):
        return sed_commands(words)
    if program in ("ssh", "autossh"):
        i = 1
        while i < len(words) and words[i].startswith("-"):
            i += 2 if words[i] in _SSH_VALUED else 1
        return " ".join(words[i + 1 :]) or None
    return None


def _stdin_text(inv: Invocation) -> str | None:
    """What a program reads on stdin when the text shows it (a here-doc, or echo/printf piped in)."""
    command = inv.command
    if command.stdin in ("heredoc", "herestring"):
        return command.heredoc
    if command.stdin == "pipe" and command.upstream and command.upstream[0] in ("echo", "printf"):
        return " ".join(a for a in command.upstream[1:] if not a.startswith("-"))
    return None


_MAX_PARALLEL_ARGUMENTS = 64
# Stands for arguments parallel reads from a file or stdin: a variable, so its value is unknown.
_PARALLEL_INPUT = "$__parallel_input"


def _parallel_reads_file(words: list[str]) -> bool:
    """`parallel -a FILE` / `--arg-file FILE`: the arguments come from a file."""
    return any(w in ("-a", "--arg-file", "--a") or w.startswith("--arg-file=") for w in words[1:])


def _parallel_text(words: list[str]) -> str | None:
    """`parallel 'rm -rf {}' ::: / ~`: the command once per argument (arguments after `:::`)."""
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] not in _PARALLEL_SEPARATORS:
        i += 2 if words[i] in _PARALLEL_VALUED else 1
    command: list[str] = []
    while i < len(words) and words[i] not in _PARALLEL_SEPARATORS:
        command.append(words[i])
        i += 1
    from_input = "::::" in words[i:] or "::::+" in words[i:] or i == len(words) or _parallel_reads_file(words)
    arguments = [w for w in words[i:] if w not in _PARALLEL_SEPARATORS]
    if from_input and command:
        # Arguments read from a file or stdin (`:::: list`, `-a list`, `… | parallel rm`): unseen.
        arguments = [_PARALLEL_INPUT]
    if len(arguments) > _MAX_PARALLEL_ARGUMENTS:
        # Each argument makes another command; judging only some would drop the one that is `/`.
        raise TooComplex(f"parallel over more than {_MAX_PARALLEL_ARGUMENTS} arguments")
    if not command:
        return "\n".join(arguments) or None  # `parallel ::: 'rm -rf /'`: the arguments are commands
    text = " ".join(command)
    if not arguments:
        return text
    lines = []
    for argument in arguments:
        quoted = f'"{argument}"' if argument == _PARALLEL_INPUT else shlex.quote(argument)
        line = text
        for token in _REPLACEMENTS:
            line = line.replace(token, quoted)
        lines.append(line if line != text else f"{text} {quoted}")
    return "\n".join(lines)


_SED_VALUED = frozenset({"-e", "--expression", "-f", "--file", "-l", "--line-length"})
_SED_ADDRESS = r"(?:\d+(?:~\d+)?|\$|/(?:[^/\\\n]|\\.)*/[IM]*|\\(.)(?:(?!\1).)*\1[IM]*)"
# GNU sed's `e command` (runs command; the rest of the line is its text), after an optional
# address or range and `!`, at the start of a line, after `;` or `{`.
_SED_EXEC = re.compile(
    rf"(?:^|[;{{}}])\s*(?:{_SED_ADDRESS}(?:\s*,\s*(?:{_SED_ADDRESS}|[+~]\d+))?)?\s*!?\s*e[ \t]+([^\n]+)",
    re.M,
)


def sed_scripts(words: list[str]) -> list[str]:
    """The script texts of a sed invocation (`-e`, `--expression=`, or the first operand)."""
    scripts: list[str] = []
    operands: list[str] = []
    i = 1
    while i < len(words):
        text = words[i]
        if text in ("-e", "--expression") and i + 1 < len(words):
            scripts.append(words[i + 1])
            i += 2
            continue
        if text.startswith("--expression="):
            scripts.append(text.split("=", 1)[1])
        elif text.startswith("-e") and len(text) > 2 and not text.startswith("--"):
            scripts.append(text[2:])
        elif text in _SED_VALUED:
            i += 1
        elif not text.startswith("-") or text == "-":
            operands.append(text)
        i += 1
    if not scripts and operands:
        scripts.append(operands[0])
    return scripts


def sed_commands(words: list[str]) -> str | None:
    """Shell text a sed script runs with its `e command` (`sed '1e rm -rf /' f`), or None."""
    found = [m.group(m.lastindex or 0).strip() for s in sed_scripts(words) for m in _SED_EXEC.finditer(s)]
    return "\n".join(f for f in found if f) or None
