"""The files a program run reads and writes, from its arguments and redirects.

Known programs say which operands they write (`cp a b` writes b, `tee f`, `sed -i`, `dd of=`);
every other operand that could name a file is judged as a read. Over-reading is harmless: a
relative word like `foo` or `s/a/b/` resolves inside the workspace.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from approvals.invocation import Invocation
from approvals.words import UNKNOWN

# Programs whose arguments are never files (a path-looking argument is just text to them).
_NO_FILES = frozenset(
    """
    echo printf true false : test [ [[ pwd whoami date sleep seq yes basename dirname export unset
    set declare typeset local readonly cd pushd popd exit return type which whereis command hash
    alias expr kill pkill killall jobs fg bg wait hostname uname id nproc locale tput clear history
    shift getopts let umask printenv env sudo doas nice timeout nohup time xargs
    """.split()  # noqa: SIM905
)
# Programs that write (or delete) every operand.
_WRITE_ALL = frozenset(
    """
    rm rmdir touch mkdir truncate shred unlink mv gzip gunzip bzip2 bunzip2 xz unxz zstd unzstd
    dos2unix unix2dos tee chmod chown chgrp chattr setfacl
    """.split()  # noqa: SIM905
)
# Programs whose last operand is the destination.
_WRITE_LAST = frozenset({"cp", "install", "ln", "rsync", "scp"})
# Programs whose first operand is not a path (mode, owner, pattern, script, filter).
_FIRST_NOT_PATH = frozenset(
    {
        "chmod",
        "chown",
        "chgrp",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ack",
        "jq",
        "yq",
        "awk",
        "gawk",
        "mawk",
    }
)
_VALUE_OPTIONS_NOT_PATHS = frozenset(
    {
        "-m",
        "--message",
        "-e",
        "--regexp",
        "-n",
        "--lines",
        "-c",
        "--bytes",
        "-name",
        "-iname",
        "-path",
        "-regex",
        "-type",
        "-maxdepth",
        "-mindepth",
        "-newer",
        "-k",
        "-t",
        "-F",
        "-d",
        "--format",
    }
)


@dataclass(frozen=True, slots=True)
class Access:
    """One file the invocation touches, as written (`~`, relative and UNKNOWN parts unresolved)."""

    text: str
    write: bool
    glob: bool = False


def accesses(inv: Invocation) -> Iterator[Access]:
    """Every file read or written by one invocation, redirects included."""
    for redirect in inv.command.redirects:
        if redirect.target is not None:
            target = redirect.target
            yield Access(target.text, write=redirect.writes, glob=False)
    program = inv.program
    if inv.words and "/" in inv.words[0].text:
        yield Access(inv.words[0].text, write=False)  # the program file itself
    if program in _NO_FILES:
        return
    if program == "git":
        yield from _git_paths(inv)
        return
    operands = _operands(inv)
    if program in _FIRST_NOT_PATH and operands and not _has_pattern_option(inv):
        operands = operands[1:]
    if program == "sed":
        yield from _sed(inv, operands)
        return
    if program == "dd":
        for arg in inv.argv[1:]:
            if arg.startswith(("if=", "of=")):
                yield Access(arg[3:], write=arg.startswith("of="))
        return
    if program == "tar":
        yield from _tar(inv, operands)
        return
    if program in ("find", "fd"):
        yield from _find(inv)
        return
    for i, text in enumerate(operands):
        write = program in _WRITE_ALL or (
            program in _WRITE_LAST and i == len(operands) - 1 and len(operands) > 1
        )
        if program == "ln" and not write:
            continue  # a link's target is not touched by ln; the link itself is checked on use
        yield Access(text, write=write, glob=_glob(inv, text))
    if program == "unzip" and "-d" in inv.argv[:-1]:
        yield Access(inv.argv[inv.argv.index("-d") + 1], write=True)
    for text in _option_paths(inv):
        yield Access(text, write=program in ("curl", "wget", "sort", "gcc", "cc", "clang"))


def _glob(inv: Invocation, text: str) -> bool:
    return any(w.glob and w.text == text for w in inv.words)


def _has_pattern_option(inv: Invocation) -> bool:
    return any(a in ("-e", "--regexp", "-f", "--file") or a.startswith("--regexp=") for a in inv.argv[1:])


def _operands(inv: Invocation) -> list[str]:
    """Non-option words, skipping the values of options known to take non-path values."""
    out: list[str] = []
    args = inv.argv[1:]
    i = 0
    options_done = False
    while i < len(args):
        arg = args[i]
        if arg == "--" and not options_done:
            options_done = True
        elif not options_done and arg.startswith("-") and arg != "-":
            if arg in _VALUE_OPTIONS_NOT_PATHS:
                i += 1
        elif "://" not in arg:
            out.append(arg)
        i += 1
    return out


def _option_paths(inv: Invocation) -> Iterator[str]:
    """Values of `--opt=/path` and `-o /path`-style options that look like paths."""
    args = inv.argv[1:]
    for i, arg in enumerate(args):
        if arg.startswith("--") and "=" in arg:
            value = arg.split("=", 1)[1]
            if _pathlike(value):
                yield value
        elif (
            arg
            in (
                "-o",
                "--output",
                "-O",
                "--output-document",
                "-f",
                "--file",
                "-C",
                "--directory",
            )
            and i + 1 < len(args)
            and _pathlike(args[i + 1])
        ):
            yield args[i + 1]


def _pathlike(text: str) -> bool:
    return (text.startswith(("/", "~", ".")) or "/" in text or UNKNOWN in text) and "://" not in text


def _sed(inv: Invocation, operands: list[str]) -> Iterator[Access]:
    in_place = any(
        a == "-i"
        or a.startswith(("-i", "--in-place"))
        or (a.startswith("-") and not a.startswith("--") and "i" in a)
        for a in inv.argv[1:]
    )
    has_script_option = any(a in ("-e", "--expression", "-f", "--file") for a in inv.argv[1:])
    files = operands if has_script_option else operands[1:]
    for text in files:
        yield Access(text, write=in_place, glob=_glob(inv, text))


def _tar(inv: Invocation, operands: list[str]) -> Iterator[Access]:
    args = inv.argv[1:]
    mode = args[0].lstrip("-") if args else ""
    extract = "x" in mode or "--extract" in args or "--get" in args
    create = "c" in mode or "r" in mode or "u" in mode or "--create" in args
    archive: str | None = None
    for i, arg in enumerate(args):
        if arg in ("-f", "--file") and i + 1 < len(args):
            archive = args[i + 1]
        elif arg.startswith("--file="):
            archive = arg[7:]
        elif i == 0 and not arg.startswith("-") and "f" in arg and len(args) > 1:
            archive = args[1]  # old-style bundled letters: `tar czf out.tgz src`
        elif arg.startswith("-") and not arg.startswith("--") and arg.endswith("f") and i + 1 < len(args):
            archive = args[i + 1]
        if arg in ("-C", "--directory") and i + 1 < len(args):
            yield Access(args[i + 1], write=extract)
    if archive is not None:
        yield Access(archive, write=create)
    for text in operands:
        if text != archive and text != args[0]:
            yield Access(text, write=extract, glob=_glob(inv, text))


def _find(inv: Invocation) -> Iterator[Access]:
    """find: the search roots (written when `-delete` is present); `-exec` runs are judged apart."""
    delete = "-delete" in inv.argv
    for arg in inv.argv[1:]:
        if arg.startswith(("-", "(", "!")):
            break
        yield Access(arg, write=delete, glob=_glob(inv, arg))


def _git_paths(inv: Invocation) -> Iterator[Access]:
    """git: `-C dir`, `--git-dir`, `--work-tree` and path-looking operands (not messages)."""
    args = inv.argv[1:]
    skip_next = False
    for i, arg in enumerate(args):
        if skip_next:
            skip_next = False
            continue
        if arg in ("-C", "--git-dir", "--work-tree") and i + 1 < len(args):
            yield Access(args[i + 1], write=True)
            skip_next = True
        elif arg.startswith("--") and "=" in arg:
            value = arg.split("=", 1)[1]
            if arg.startswith(("--git-dir=", "--work-tree=")) or _pathlike(value):
                yield Access(value, write=True)
        elif arg in (
            "-m",
            "--message",
            "-F",
            "--file",
            "-c",
            "--author",
            "--date",
            "-S",
            "--format",
            "--pretty",
        ):
            skip_next = True
        elif (not arg.startswith("-") and _pathlike(arg)) or (
            i > 0 and not arg.startswith("-") and _secretish(arg)
        ):
            yield Access(arg, write=True)


def _secretish(text: str) -> bool:
    lowered = text.lower()
    return (
        lowered.startswith(".env")
        or lowered.endswith((".pem", ".key", ".env"))
        or "id_rsa" in lowered
        or "id_ed25519" in lowered
    )
