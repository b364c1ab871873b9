"""From simple commands to the programs that really run: strip wrappers, open `-c` strings and eval."""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from approvals.permissions.budget import TooComplex, check_deadline, spend
from approvals.permissions.shell.interpreters import (
    SHELLS,
    interpreter_family,
    nested_shell_text,
    reads_code_from_pipe,
    with_inline_code,
)
from approvals.permissions.shell.parse import parse_shell
from approvals.permissions.shell.programs import KNOWN_PROGRAMS
from approvals.permissions.shell.runners import (
    RUNNERS,
    option_commands,
    runner_rest,
    wrapper_outputs,
    wrapper_shell_text,
)
from approvals.permissions.shell.script import Script, SimpleCommand
from approvals.permissions.shell.words import UNKNOWN, Word, skip_options

MAX_DEPTH = 6
# What a program name may contain without being a puzzle (`[`, `[[` and `.` are real commands).
_PROGRAM_NAME = re.compile(r"^[A-Za-z0-9_.+\-/@%:,=~\[\]]*$")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
# Variables whose mere assignment makes the text "not plain words" (the others, `PAGER`, `CC`,
# `PATH`… are judged by value in approvals/permissions/commands/environment.py).
CODE_RUNNING_VARIABLES = frozenset(
    """BASH_ENV ENV PROMPT_COMMAND PS0 PS4 IFS SHELLOPTS BASHOPTS GIT_EXEC_PATH PYTHONSTARTUP
    PYTHONHOME PYTHONINSPECT""".split()  # noqa: SIM905
)
# Variables that send an otherwise local query to another machine (`DOCKER_HOST=tcp://… docker ps`).
REMOTE_VARIABLES = frozenset({"DOCKER_HOST", "DOCKER_CONTEXT", "CONTAINER_HOST", "KUBECONFIG"})
# Pure wrappers: they run their operand and change nothing else that matters to a permission check.
# Each maps to (options that take a value, number of leading operands before the command).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "noglob": (frozenset(), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "--class", "--classdata"}), 0),
    "unbuffer": (frozenset(), 0),
    "chronic": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "taskset": (frozenset(), 1),
    "caffeinate": (frozenset({"-t", "-w"}), 0),
    "eatmydata": (frozenset(), 0),
    "fakeroot": (frozenset({"-l", "--lib", "--faked", "-i", "-s", "-b"}), 0),
    "nocache": (frozenset(), 0),
    "catchsegv": (frozenset(), 0),
}
# Wrappers whose options are too many to table (or change privilege, namespaces, scheduling or
# tracing): judged as themselves *and* for what they run, which starts at the first word naming a
# known program (or after `--`). A program whose operand is a program name is a wrapper too.
_SCANNED_WRAPPERS = frozenset(
    """chrt flock chroot unshare setpriv prlimit systemd-run numactl strace ltrace valgrind firejail
    bwrap nsenter cgexec sg runuser toybox gdb ssh-agent dbus-run-session xvfb-run torsocks
    proxychains proxychains4 tsocks with-contenv s6-setuidgid chpst setuidgid daemonize sem trickle
    ionice schedtool cpulimit systemd-inhibit sandbox-exec firejail minijail0 ld.so
    ld-linux-x86-64.so.2 nsjail proot fakechroot linux32 linux64 setarch uclampset""".split()  # noqa: SIM905
)
# Options of a wrapper that set the directory its command runs in: judged as a `cd` before it.
_CHDIR_OPTIONS: dict[str, frozenset[str]] = {
    "env": frozenset({"-C", "--chdir"}),
    "sudo": frozenset({"-D", "--chdir"}),
    "systemd-run": frozenset({"--working-directory"}),
    "unshare": frozenset({"-w", "--wd"}),
    "nsenter": frozenset({"-w", "--wd"}),
    "bwrap": frozenset({"--chdir"}),
    "firejail": frozenset({"--chdir"}),
    "proot": frozenset({"-w", "--cwd"}),
    "pnpm": frozenset({"-C", "--dir"}),
    "yarn": frozenset({"--cwd"}),
}
# Runners that change privilege: judged as themselves (high risk) *and* for what they run.
_PRIVILEGE_RUNNERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-R", "-T", "-U", "--user", "--group"}),
    "doas": frozenset({"-u", "-C"}),
    "pkexec": frozenset({"--user"}),
    "run0": frozenset({"--user", "-u"}),
}
_XARGS_VALUE_OPTIONS = frozenset(
    {"-I", "-n", "-P", "-d", "-L", "-s", "-a", "-E", "--max-args", "--max-procs", "--delimiter", "--arg-file"}
)


@dataclass(frozen=True, slots=True)
class Invocation:
    """One program run: `argv[0]` is the program's basename; `words` are the de-quoted words."""

    argv: tuple[str, ...]
    words: tuple[Word, ...]
    command: SimpleCommand
    wrappers: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    # xargs appends arguments read from stdin, so the full argv is not known.
    extra_args: bool = False
    # Code handed to an interpreter inline (`python -c`, `node -e`, a here-doc), for the risk check.
    inline_code: str | None = None
    # Nesting depth: 0 for text the agent wrote, 1+ for `-c` strings, eval and substitutions.
    depth: int = 0
    # Symbolic links an earlier command of the same text created: (link as written, its target).
    links: tuple[tuple[str, str], ...] = ()

    @property
    def program(self) -> str:
        """The program's basename (`/usr/bin/git` → git)."""
        return self.argv[0] if self.argv else ""

    @property
    def text(self) -> str:
        """The command as a rule sees it: words joined by single spaces."""
        return " ".join(self.argv).replace(UNKNOWN, "$?")


@dataclass(frozen=True, slots=True)
class Expansion:
    """Every invocation in a piece of shell text, and reasons it is not plain words."""

    invocations: tuple[Invocation, ...]
    problems: tuple[str, ...]
    fork_bomb: bool
    local_names: frozenset[str]
    parse_error: bool
    # An `a && cd x && b` chain with no nested shell text or substitutions: `cd` is followed exactly.
    and_chain: bool = False
    # Why the text (or shell text nested in it) is refused outright; the engine denies.
    refused: str | None = None


@functools.lru_cache(maxsize=8192)
def expand(text: str, depth: int = 0) -> Expansion:
    """Parse shell text and expand wrappers and nested shells, recursively."""
    script = parse_shell(text)
    invocations: list[Invocation] = []
    problems = list(script.problems) + _environment_problems(script)
    fork_bomb = script.fork_bomb
    local_names = set(script.local_names)
    parse_error = script.parse_error
    and_chain = script.and_chain
    refused = script.refused
    links: list[tuple[str, str]] = []
    for command in script.commands:
        for inv in _unwrap(command, depth):
            check_deadline()
            if links:
                inv = replace(inv, links=tuple(links))
            invocations.extend(_cdpath(inv))
            invocations.append(inv)
            links.extend(_symlinks(inv))
            and_chain = and_chain and not (inv.program == "cd" and inv.wrappers)
            problems.extend(inv.problems)
            local_names |= _read_names(inv)
            and_chain = and_chain and not any(w.substitution for w in inv.words)
            if inv.program == "eval":
                problems.append("eval runs text as shell code")
            if inv.program == "alias" and any("=" in a for a in inv.argv[1:]):
                problems.append("defines an alias (changes what later commands run)")
            for nested in _nested_texts(inv):
                if UNKNOWN in nested:
                    problems.append(f"{inv.program} runs shell text computed at run time")
                    nested = nested.replace(UNKNOWN, "${__unknown__}")
                if depth >= MAX_DEPTH:
                    problems.append("shell nesting too deep")
                    continue
                and_chain = False
                spend(len(nested) + 1, "nested shell text")
                sub = expand(nested, depth + 1)
                invocations.extend(sub.invocations)
                problems.extend(sub.problems)
                fork_bomb = fork_bomb or sub.fork_bomb
                local_names |= sub.local_names
                parse_error = parse_error or sub.parse_error
                refused = refused or sub.refused
    if len(script.evaluated) > _MAX_EVALUATED:
        raise TooComplex(f"more than {_MAX_EVALUATED} stored values evaluated as code")
    for evaluated in script.evaluated:
        # `x='a[$(rm -rf /)]'; echo $((x))`: bash runs the substitution stored in x.
        problems.append("a stored value is evaluated as code (arithmetic, ${x@P} or ${!x})")
        if depth < MAX_DEPTH:
            spend(len(evaluated) + 1, "stored values evaluated as code")
            sub = expand(evaluated, depth + 1)
            invocations.extend(sub.invocations)
            fork_bomb = fork_bomb or sub.fork_bomb
            refused = refused or sub.refused
    return Expansion(
        tuple(invocations),
        tuple(dict.fromkeys(problems)),
        fork_bomb,
        frozenset(local_names),
        parse_error,
        and_chain and not (fork_bomb or parse_error),
        refused,
    )


def _nested_texts(inv: Invocation) -> list[str]:
    """Shell text an invocation runs: a `-c` string, a wrapper's, and what its options run."""
    nested = nested_shell_text(inv)
    if nested is None:
        nested = wrapper_shell_text(inv)
    return ([] if nested is None else [nested]) + list(option_commands(inv))


def _symlinks(inv: Invocation) -> list[tuple[str, str]]:
    """`ln -s / l`: later `rm -rf l/` reaches the target, so the floor must know the link."""
    if inv.program != "ln":
        return []
    flags = [a for a in inv.argv[1:] if a.startswith("-")]
    if not any(f == "--symbolic" or (not f.startswith("--") and "s" in f) for f in flags):
        return []
    operands = [a for a in inv.argv[1:] if not a.startswith("-")]
    if len(operands) < 2:
        return []
    link = operands[-1].rstrip("/") or "/"
    return [
        (link, operands[0]),
        (posixpath.join(link, posixpath.basename(operands[0].rstrip("/"))), operands[0]),
    ]


# Stored values evaluated as code, or CDPATH places, judged per text; more is refused, not cut short.
_MAX_EVALUATED = 8


def _cdpath(inv: Invocation) -> list[Invocation]:
    """`CDPATH=/ cd usr`: cd may land in any CDPATH entry; each is judged as a possible `cd`."""
    if inv.program not in ("cd", "pushd") or len(inv.argv) < 2:
        return []
    target = inv.argv[-1]
    values = [w.text for name, w in inv.command.environment if name == "CDPATH"]
    if not values or target.startswith(("/", ".", "~")) or UNKNOWN in target:
        return []
    places = [p for p in values[-1].split(":") if p and UNKNOWN not in p]
    if len(places) > _MAX_EVALUATED:
        raise TooComplex(f"CDPATH of more than {_MAX_EVALUATED} places")
    return [
        Invocation(("cd", posixpath.join(p, target)), (Word(text="cd"), Word(text=posixpath.join(p, target))),
                   inv.command, ("CDPATH",), depth=inv.depth)
        for p in places
    ]  # fmt: skip


def _read_names(inv: Invocation) -> set[str]:
    """`read -r line`, `mapfile -t lines`: variables the script fills from input it chose."""
    if inv.program not in ("read", "mapfile", "readarray"):
        return set()
    names: set[str] = set()
    skip = False
    for arg in inv.argv[1:]:
        if skip:
            skip = False
        elif arg in ("-p", "-d", "-n", "-N", "-t", "-u", "-a", "-C", "-c", "-O", "-s"):
            skip = arg != "-t" or inv.program == "read"
            if arg == "-a":
                skip = False  # `read -a NAME`: the next word is the array's name
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", arg):
            names.add(arg)
    return names


def _environment_problems(script: Script) -> list[str]:
    """Variables that make the next program run other code (`LD_PRELOAD=…`, `GIT_SSH_COMMAND=…`)."""
    names = set(script.local_names)
    for command in script.commands:
        for word in command.words:
            match = _ASSIGNMENT.match(word.text)
            if match:
                names.add(match.group(1))
    risky = sorted(
        n for n in names if n in CODE_RUNNING_VARIABLES or n.startswith(("DYLD_", "LD_", "GIT_CONFIG"))
    )
    remote = sorted(names & REMOTE_VARIABLES)
    return [f"sets {name}, which can make programs run other code" for name in risky] + [
        f"sets {name}, which points a tool at another machine" for name in remote
    ]


def expand_script(script: Script) -> Iterator[Invocation]:
    """Unwrap each command of an already parsed script (no recursion into nested shell text)."""
    for command in script.commands:
        yield from _unwrap(command, 0)


_KEYWORDS = frozenset(
    [
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "do",
        "done",
        "case",
        "esac",
        "while",
        "until",
        "for",
        "in",
        "function",
        "select",
        "{",
        "}",
        "!",
        "[[",
        "]]",
        "coproc",
    ]
)


def _program_problems(word: Word) -> list[str]:
    problems: list[str] = []
    if word.text in _KEYWORDS:
        problems.append(f"a shell keyword ({word.text}) where a program should be")
    if UNKNOWN in word.text or not word.plain:
        problems.append("the program name is computed at run time (expansion or substitution)")
    if word.obfuscated or word.glob:
        problems.append("the program name is obfuscated (escapes, ANSI-C quoting or globs)")
    if not _PROGRAM_NAME.match(word.text.replace(UNKNOWN, "")):
        problems.append("the program name has unusual characters")
    return problems


def _unwrap(command: SimpleCommand, depth: int) -> Iterator[Invocation]:
    """Strip pure wrappers and privilege runners, yielding every program that actually runs."""
    words = _split_program_word(command.words, _separators(command))
    wrappers: list[str] = []
    extra_args = False
    while words:
        head = words[0]
        name = posixpath.basename(head.text) if head.plain else head.text
        argv = (name, *(w.text for w in words[1:]))
        problems = tuple(_program_problems(head))
        base = Invocation(argv, words, command, tuple(wrappers), problems, extra_args, depth=depth)
        rest, itself = _wrapped(name, words)
        if rest is None:
            rest = _operand_program(name, words)
            if rest is None:
                yield from _find_exec(base, depth) if name == "find" else (_finish(base),)
                return
            yield _finish(base)  # `chrt 1 rm …`, `mytool --x rm …`: judged itself and what it runs
        elif itself or not rest:
            # A privilege runner, or a runner that may download what it runs, is judged itself as
            # well; a wrapper with nothing to run (`exec 3<>…`, a bare `env`) is judged as itself,
            # redirects included.
            yield base
            if not rest:
                return
        chdir = _chdir(name, words[1 : len(words) - len(rest)])
        if chdir is not None:
            # `env -C / rm -rf usr`, `sudo -D /etc cat shadow`: the command runs there.
            yield Invocation(
                ("cd", chdir.text), (Word(text="cd"), chdir), command, tuple(wrappers), depth=depth
            )
        wrappers.append(name)
        extra_args = extra_args or name in ("xargs", "parallel")
        outputs = wrapper_outputs(name, words[1 : len(words) - len(rest)])
        if outputs:
            # `time -o FILE cmd` writes FILE: judged like a redirect of what it runs.
            command = replace(command, redirects=command.redirects + outputs)
        words = rest


def _split_program_word(words: tuple[Word, ...], separators: str = " \t\n") -> tuple[Word, ...]:
    """`cmd="rm -rf /"; $cmd`: an unquoted expansion in command position splits into words (on IFS)."""
    head = words[0] if words else None
    if head is None or not head.variables or UNKNOWN in head.text:
        return words
    if head.quoted and head.variables != ("@",):
        return words  # `"$x"` stays one word; `"$@"` is every positional parameter
    text = head.text
    for separator in separators:
        text = text.replace(separator, " ")
    if " " not in text.strip():
        return words
    parts = tuple(Word(text=t, plain=False, variables=head.variables) for t in text.split())
    return parts + words[1:]


def _separators(command: SimpleCommand) -> str:
    """IFS as the text sets it (`IFS=,; $x` splits on commas), else bash's default."""
    ifs = [word.text for name, word in command.environment if name == "IFS"]
    return (ifs[-1] if ifs and UNKNOWN not in ifs[-1] else "") + " \t\n"


def _chdir(name: str, options: tuple[Word, ...]) -> Word | None:
    """The directory a wrapper's options make its command run in, if any."""
    names = _CHDIR_OPTIONS.get(name)
    if names is None:
        return None
    for i, word in enumerate(options):
        option, eq, value = word.text.partition("=")
        if eq and option in names:
            return Word(text=value, plain=word.plain)
        if word.text in names and i + 1 < len(options):
            return options[i + 1]
    return None


def is_program_name(word: Word) -> bool:
    """A word that names a program the engine knows (so the words from it on are a command)."""
    if not word.plain or not word.text or word.text.startswith("-"):
        return False
    name = posixpath.basename(word.text)
    return (
        name in KNOWN_PROGRAMS or name in _WRAPPERS or name in _PRIVILEGE_RUNNERS or name in SHELLS
        or name in _SCANNED_WRAPPERS or name in _DESTRUCTIVE_NAMES or interpreter_family(name) is not None
    )  # fmt: skip


_DESTRUCTIVE_NAMES = frozenset(
    """rm rmdir unlink shred srm wipe dd mv cp ln install chmod chown chgrp chattr setfacl truncate tee
    find git cargo make cmake rsync tar mkfs wipefs sgdisk zpool zfs lvremove vgremove pvremove
    mdadm blkdiscard cryptsetup parted fdisk sfdisk xargs parallel""".split()  # noqa: SIM905
)
# Programs whose operands are text or names, never a command they run (`echo rm`, `man rm`).
_NOT_WRAPPERS = frozenset(
    """echo printf man info whatis apropos which type whereis help tldr command hash alias unalias
    complete compgen pgrep pkill killall grep egrep fgrep rg ag ack git apt apt-get apt-cache dpkg
    yum dnf brew pip pip3 npm yarn pnpm cargo gem conda uv poetry go make""".split()  # noqa: SIM905
)


def _operand_program(name: str, words: tuple[Word, ...]) -> tuple[Word, ...] | None:
    """For a scanned wrapper or an unknown program: the words from its first program-name operand."""
    scanned = name in _SCANNED_WRAPPERS
    if not scanned and (name in KNOWN_PROGRAMS or name in _NOT_WRAPPERS or not name):
        return None
    start = 1
    if name == "gdb":
        texts = [w.text for w in words]
        if "--args" not in texts:
            return None
        start = texts.index("--args") + 1
        return words[start:] or None
    for i in range(start, len(words)):
        if words[i].text == "--" and scanned:
            return words[i + 1 :] or None
        if is_program_name(words[i]):
            return words[i:]
    return None


def _wrapped(name: str, words: tuple[Word, ...]) -> tuple[tuple[Word, ...] | None, bool]:
    """The words a wrapper runs (maybe empty; None: not a wrapper), and whether it is judged too.

    Judged itself as well: a privilege runner, a runner that may download what it runs.
    """
    if name in _WRAPPERS and not (name == "command" and len(words) > 1 and words[1].text in ("-v", "-V")):
        valued, operands = _WRAPPERS[name]
        return words[skip_options(words, 1, valued, operands) :], False
    if name == "env":
        index = _env_command_index(words)
        return (() if index is None else words[index:]), False
    if name in _PRIVILEGE_RUNNERS:
        return words[skip_options(words, 1, _PRIVILEGE_RUNNERS[name], 0) :], True
    if name == "xargs":
        return words[skip_options(words, 1, _XARGS_VALUE_OPTIONS, 0) :] or (Word(text="echo"),), False
    if name in ("busybox", "toybox") and len(words) > 1 and not words[1].text.startswith("-"):
        return words[1:], False
    if name in RUNNERS:
        found = runner_rest(name, words)
        if found is None:
            return None, False
        rest, local = found
        if local:
            return rest, False
        # `npx -p pkg cmd`, `uv run --with x pytest`: what runs starts at the first known program.
        start = next((i for i, w in enumerate(rest) if is_program_name(w)), len(rest))
        return rest[start:], True
    return None, False


def _finish(base: Invocation) -> Invocation:
    """Attach inline code, and flag code that arrives at run time."""
    inv = with_inline_code(base)
    name = inv.program
    if inv.extra_args and (name in SHELLS or name in ("eval", "source", ".") or interpreter_family(name)):
        inv = replace(inv, problems=(*inv.problems, f"{name} runs code assembled from its input"))
    if reads_code_from_pipe(inv):
        inv = replace(inv, problems=(*inv.problems, "runs code read from a pipe (decode-and-execute)"))
    if inv.inline_code is not None and UNKNOWN in inv.inline_code:
        inv = replace(inv, problems=(*inv.problems, "runs interpreter code computed at run time"))
    return inv


def _env_command_index(words: tuple[Word, ...]) -> int | None:
    i = 1
    while i < len(words):
        text = words[i].text
        if text in ("-u", "--unset", "-C", "--chdir", "-S", "--split-string"):
            if text in ("-S", "--split-string"):
                return None  # splits a string: judged as shell text (runners.wrapper_shell_text)
            i += 2  # `-C DIR` is judged as a `cd DIR` before the command (see _chdir)
        elif text.startswith("-") or ("=" in text and not text.startswith("=")):
            i += 1
        else:
            return i
    return None


def _find_exec(base: Invocation, depth: int) -> Iterator[Invocation]:
    """`find … -exec cmd {} ;`: yield find itself and each command it executes."""
    yield base
    words = base.words
    i = 1
    while i < len(words):
        if words[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(words) and words[end].text not in (";", "+"):
                end += 1
            inner = SimpleCommand(words[i + 1 : end], (), "inherit", None, ())
            for inv in _unwrap(inner, depth):
                yield replace(inv, wrappers=("find", *inv.wrappers), extra_args=True)
            i = end
        i += 1
