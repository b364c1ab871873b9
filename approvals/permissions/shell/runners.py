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
# download code, so the runner is judged as itself (egress) as well as for what it runs.
_RUNNER_OPTIONS: dict[str, frozenset[str]] = {
    "uv": frozenset(
        {"--frozen", "--locked", "--offline", "--no-sync", "-q", "--quiet", "--all-extras", "--no-dev",
         "--dev", "--active", "--no-project"}
    ),
    "poetry": frozenset({"-q", "--quiet", "--no-interaction", "-n"}),
    "npx": frozenset({"--no-install", "--no", "--offline", "--prefer-offline", "-q", "--quiet"}),
    # `bundle exec rspec`, `pnpm exec tsc`, `yarn exec jest`: a program from the project's own bundle.
    "bundle": frozenset(), "pnpm": frozenset(), "yarn": frozenset(),
    # `npm exec -- tsc` is npx; `rustup run stable cargo test` may install the toolchain first.
    "npm": frozenset({"--no", "--offline", "--prefer-offline", "-q", "--quiet", "--silent"}),
    "rustup": frozenset(),
}  # fmt: skip
# The runner's verb that runs the rest (`uv run …`, `bundle exec …`); npx has none.
_RUNNER_VERB = {"uv": ("run",), "poetry": ("run",), "bundle": ("exec",), "pnpm": ("exec",),
                "yarn": ("exec",), "npm": ("exec", "x"), "rustup": ("run",)}  # fmt: skip
# Words before the verb that keep a workspace run local (`pnpm -r exec`, `pnpm --filter web exec`,
# `yarn workspace web exec`), and those of them that take the next word as their value.
_BEFORE_VERB: dict[str, frozenset[str]] = {
    "pnpm": frozenset(
        """-r --recursive --parallel --stream --no-bail --bail -w --workspace-root -s --silent --sort
        --no-sort --include-workspace-root --aggregate-output --report-summary --filter -F
        --filter-prod -C --dir --reporter --workspace-concurrency --resume-from""".split()  # noqa: SIM905
    ),
    "yarn": frozenset({"--cwd", "-s", "--silent"}),
}
_BEFORE_VERB_VALUED = frozenset(
    {"--filter", "-F", "--filter-prod", "-C", "--dir", "--reporter", "--workspace-concurrency",
     "--resume-from", "--cwd"}
)  # fmt: skip
# Runners whose verb downloads what it runs unless the project has it: judged as themselves too.
_FETCHING_VERBS = frozenset({"rustup"})
# What `npx NAME` runs without a download when the project has it (the names of real packages, so a
# missing one fetches the well-known tool, never an arbitrary name the agent chose).
NPX_LOCAL_TOOLS = frozenset(
    """tsc prettier eslint jest vitest mocha ts-node tsx webpack rollup esbuild stylelint biome playwright
    cypress next vite nx turbo ava""".split()  # noqa: SIM905
)
RUNNERS = frozenset(_RUNNER_OPTIONS)


def _verb_index(name: str, words: tuple[Word, ...]) -> int | None:
    """Index of the runner's verb (`exec` in `pnpm -r --filter web exec`), or None when absent."""
    allowed = _BEFORE_VERB.get(name, frozenset())
    i = 1
    while i < len(words):
        text, option = words[i].text, words[i].text.split("=", 1)[0]
        if text in _RUNNER_VERB[name]:
            return i
        if name == "yarn" and text == "workspace" and i == 1 and len(words) > 2:
            i += 2  # `yarn workspace web exec …`
        elif option in allowed:
            i += 2 if text in _BEFORE_VERB_VALUED else 1
        else:
            return None
    return None


def runner_rest(name: str, words: tuple[Word, ...]) -> tuple[tuple[Word, ...], bool] | None:
    """What `uv run …`, `pnpm -r exec …` or `npx …` runs, and whether it runs locally only.

    Not local (`npx pkg@1 …`, `uv run --with x …`): the runner may download what it runs, so it is
    judged as itself too; the words after its options are still judged for what they run. None: not
    a run at all (`uv sync`, `npm test`).
    """
    i = 1
    if name in _RUNNER_VERB:
        verb = _verb_index(name, words)
        if verb is None:
            return None
        i = verb + 1
    options = _RUNNER_OPTIONS[name]
    local = name not in _FETCHING_VERBS
    while i < len(words) and words[i].text.startswith("-"):
        if words[i].text == "--":
            i += 1
            break
        local = local and words[i].text in options
        i += 1
    rest = words[i:]
    if not rest or any(w.text in ("-c", "--call") or w.text.startswith("--call=") for w in words[1:i]):
        return None  # `npx -c '…'` runs shell text: judged as such (option_commands)
    head = rest[0].text
    local = local and all(w.plain for w in words[:i]) and rest[0].plain
    if name in ("npx", "npm"):
        local_only = any(w.text in ("--no-install", "--no") for w in words[1:i])
        local = local_only or (local and "@" not in head and "/" not in head and head in NPX_LOCAL_TOOLS)
    if name == "rustup":
        rest = rest[1:]  # the toolchain; the command follows it
    if name == "uv" and head.endswith(".py"):
        return (Word(text="python"), *rest), local  # `uv run script.py` runs it with the project's python
    return rest, local


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


# Options whose value a program runs (a command line, or a program it starts with arguments of its
# own): judged as shell text, like a `-c` string. Long options match as GNU getopt reads them
# (`--to-com=…`); short letters count inside a cluster, with the cluster's rest as their value.
_COMMAND_OPTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "split": (("--filter",), ""),
    "sort": (("--compress-program",), ""),
    "tar": (("--to-command", "--use-compress-program", "--rsh-command", "--info-script",
             "--new-volume-script"), "IF"),
    "rsync": (("--rsh",), "e"),
    "npm": (("--call",), "c"),
    "npx": (("--call",), "c"),
}  # fmt: skip
_COMMAND_OPTIONS["gtar"] = _COMMAND_OPTIONS["bsdtar"] = _COMMAND_OPTIONS["tar"]
# Short letters of those programs that take a value (so a cluster ends at them: `tar -fI` is `-f I`).
_TAR_VALUED = "bCfFgHIKLNTVX"
_VALUED_LETTERS = {"tar": _TAR_VALUED, "gtar": _TAR_VALUED, "bsdtar": _TAR_VALUED, "rsync": "efTBM",
                   "sort": "kStTo", "split": "abClnt", "npm": "cpw", "npx": "cpw"}  # fmt: skip
COMMAND_OPTION_PROGRAMS = frozenset(_COMMAND_OPTIONS)
_CHECKPOINT_EXEC = "exec="


def option_commands(inv: Invocation) -> tuple[str, ...]:
    """The command lines a program's options run: `split --filter=CMD`, `tar -I CMD`, `rsync -e CMD`.

    Also tar's `--checkpoint-action=exec=CMD`, and tmux and expect, whose commands are found as
    well as their grammars allow (both stay asks of their own: `risk.EXEC_CAPABLE`).
    """
    program = inv.program
    if program == "tmux":
        return _tmux_texts([w.text for w in inv.words])
    if program == "expect":
        return _expect_texts(inv)
    if program not in _COMMAND_OPTIONS:
        return ()
    words = [w.text for w in inv.words]
    # npx's and `npm exec`'s own options end at the command they run (`npx eslint -c conf.json`).
    operands = {"npx": 0, "npm": 1}.get(program)
    found = _option_values(words, *_COMMAND_OPTIONS[program], _VALUED_LETTERS.get(program, ""), operands)
    if program in ("tar", "gtar", "bsdtar"):
        found += [v[len(_CHECKPOINT_EXEC) :] for v in _option_values(words, ("--checkpoint-action",), "", "")
                  if v.startswith(_CHECKPOINT_EXEC)]  # fmt: skip
        found += _old_style_tar(words)
    if program == "split":
        found = [_split_file(text, words) for text in found]
    return tuple(found)


def _option_values(
    words: list[str], long: tuple[str, ...], short: str, valued: str, operands: int | None = None
) -> list[str]:
    """Values of the long options `long` (or a prefix of one, as getopt reads it) and short `short`.

    With `operands`, the options end after that many operands (the rest is a command's own words).
    """
    found: list[str] = []
    i = 1
    while i < len(words):
        text = words[i]
        following = words[i + 1] if i + 1 < len(words) else ""
        if text == "--":
            break
        if not text.startswith("-") and operands is not None:
            if operands == 0:
                break
            operands -= 1
        if text.startswith("--"):
            name, eq, value = text.partition("=")
            if len(name) > 4 and any(option.startswith(name) for option in long):
                found.append(value if eq else following)
                i += 1 if eq else 2
                continue
        elif text.startswith("-") and len(text) > 1:
            for at, letter in enumerate(text[1:], start=1):
                if letter in short:
                    found.append(text[at + 1 :] or following)
                if letter in valued:
                    i += 0 if text[at + 1 :] else 1
                    break
        i += 1
    return found


def _old_style_tar(words: list[str]) -> list[str]:
    """`tar xIf CMD a.tar`: a first word without a dash is letters whose values follow in order."""
    if len(words) < 2 or words[1].startswith("-"):
        return []
    found: list[str] = []
    next_value = 2
    for letter in words[1]:
        if letter in _VALUED_LETTERS["tar"]:
            if letter in "IF" and next_value < len(words):
                found.append(words[next_value])
            next_value += 1
    return found


_FILE_VARIABLE = re.compile(r"\$(?:FILE\b|\{FILE\})")


def _split_file(text: str, words: list[str]) -> str:
    """Split runs its filter with $FILE set to each output name: PREFIX (an operand, else `x`) + `aa`."""
    operands = _option_operands(words, _VALUED_LETTERS["split"], ("--filter",))
    prefix = operands[1] if len(operands) > 1 else "x"
    return _FILE_VARIABLE.sub(lambda _: shlex.quote(prefix + "aa"), text)


def _option_operands(words: list[str], valued: str, long_valued: tuple[str, ...]) -> list[str]:
    operands: list[str] = []
    i = 1
    while i < len(words):
        text = words[i]
        if text == "--":
            operands.extend(words[i + 1 :])
            break
        if text.startswith("--"):
            i += 2 if text in long_valued else 1
            continue
        if text.startswith("-") and len(text) > 1:
            i += 2 if text[-1] in valued and len(text) == 2 else 1
            continue
        operands.append(text)
        i += 1
    return operands


# tmux's global options that take a value (`-c` runs a shell command, like `sh -c`).
_TMUX_VALUED = frozenset({"-L", "-S", "-f", "-T"})


def _tmux_texts(words: list[str]) -> tuple[str, ...]:
    """Every word after each tmux command's name, and their join: one of them is the command it runs.

    tmux's commands (`new-session 'CMD'`, `send-keys 'CMD' Enter`, `run-shell`, `if-shell`, chained
    with `;`) take options of their own, so which word is the command is not certain: all are judged.
    """
    found: list[str] = []
    i = 1
    while i < len(words) and words[i].startswith("-"):
        if words[i] == "-c" and i + 1 < len(words):
            found.append(words[i + 1])
        i += 2 if words[i] in _TMUX_VALUED or words[i] == "-c" else 1
    operands: list[str] = []
    for text in [*words[i + 1 :], ";"]:
        if text in (";", "\\;"):
            found.extend(operands)
            if len(operands) > 1:
                found.append(" ".join(operands))
            operands = []
        elif not text.startswith("-"):
            operands.append(text)
    return tuple(found)


_EXPECT_RUN = re.compile(r"(?:^|[;\n\[{])[ \t]*(?:spawn|exec|system)[ \t]+((?:-\S+[ \t]+)*)([^;\n\]]+)")


def _expect_texts(inv: Invocation) -> tuple[str, ...]:
    """Commands an expect script starts (`spawn CMD`, `exec CMD`, `system CMD`): `-c` or a here-doc.

    Tcl braces quote like shell single quotes; a script read from a file stays unseen (an ask).
    """
    words = [w.text for w in inv.words]
    scripts = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-c"]
    text = _stdin_text(inv)
    if text is not None:
        scripts.append(text)
    found = [m.group(2).strip() for s in scripts for m in _EXPECT_RUN.finditer(s)]
    return tuple(f.replace("{", "'").replace("}", "'") for f in found if f)
