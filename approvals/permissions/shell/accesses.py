"""The files a program run reads, writes or executes, from its arguments and redirects.

Known programs say which operands they write (`cp a b` writes b, `tee f`, `sed -i`, `dd of=`) or
run (`python x.py`, `source f`, `./tool`); every other operand that could name a file is judged
as a read. Over-reading is harmless: a relative word like `foo` or `s/a/b/` resolves inside the
workspace, so only words that really point elsewhere (or at a secret) change a verdict.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

from approvals.permissions.budget import TooComplex
from approvals.permissions.shell.interpreters import SHELLS, interpreter_family
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.programs import KNOWN_PROGRAMS
from approvals.permissions.shell.words import MAX_BRACE_VARIANTS, UNKNOWN, brace_variants

Mode = Literal["read", "write", "exec"]

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
    dos2unix unix2dos tee chmod chown chgrp chattr setfacl patch ed ex vi vim nvim nano emacs strip
    ar mkdocs
    """.split()  # noqa: SIM905
)
# Programs whose last operand is the destination (the others are read).
_WRITE_LAST = frozenset({"cp", "install", "ln", "rsync", "scp", "sphinx-build", "split"})
# Programs whose first operand is the file they write (`zip out.zip src`).
_WRITE_FIRST = frozenset({"zip", "7z", "ar"})
# Programs whose first operand is a mode, owner, pattern, script or filter, not a path.
_FIRST_NOT_PATH = frozenset(
    "chmod chown chgrp grep egrep fgrep rg ag ack jq yq awk gawk mawk 7z".split()  # noqa: SIM905
)
# Options whose value is code the program runs (a makefile, a shell, a JS config): from outside the
# workspace that is running outside code, not a mere read.
_MAKE_CODE = frozenset({"-f", "--file", "--makefile"})
_JS_CONFIG = frozenset({"-c", "--config", "--rulesdir", "--resolve-plugins-relative-to"})
_GRADLE_CODE = frozenset(
    {"-b", "--build-file", "-c", "--settings-file", "-I", "--init-script", "-p", "--project-dir"}
)
_CODE_OPTIONS: dict[str, frozenset[str]] = {
    "make": _MAKE_CODE, "gmake": _MAKE_CODE,
    "npm": frozenset({"--prefix", "--script-shell"}), "yarn": frozenset({"--script-shell"}),
    "pnpm": frozenset({"--script-shell"}),
    "eslint": _JS_CONFIG, "jest": _JS_CONFIG, "vitest": _JS_CONFIG, "prettier": _JS_CONFIG,
    "webpack": _JS_CONFIG, "rollup": _JS_CONFIG,
    "jq": frozenset({"-L", "-f", "--from-file"}), "go": frozenset({"-vettool", "-toolexec", "-exec"}),
    "pytest": frozenset({"-c", "--rootdir", "--confcutdir"}), "mypy": frozenset({"--config-file"}),
    # Options naming the code a build or a JVM runs: from outside the workspace that is running outside code.
    "java": frozenset({"-jar", "-cp", "-classpath", "--class-path", "--module-path", "-p"}),
    "mvn": frozenset({"-f", "--file"}), "mvnw": frozenset({"-f", "--file"}),
    "gradle": _GRADLE_CODE, "gradlew": _GRADLE_CODE, "cargo": frozenset({"--manifest-path"}),
}  # fmt: skip
# Option values that are text, never paths (commit messages, formats).
_TEXT_OPTIONS = frozenset({"-m", "--message", "--format", "--pretty"})
_WRITE_OPTIONS = frozenset(
    {"-o", "--output", "-O", "--output-document", "-C", "--directory", "-t", "-out", "--outfile",
     "--outdir", "--outDir", "--out-dir", "--output-path", "--out-file", "--log-file", "--site-dir",
     "--dest", "--target-dir"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Access:
    """One file the invocation touches, as written (`~`, relative and UNKNOWN parts unresolved)."""

    text: str
    mode: Mode

    @property
    def write(self) -> bool:
        """True for a write (reads and executions are not)."""
        return self.mode == "write"


def accesses(inv: Invocation) -> Iterator[Access]:
    """Every file read, written or executed by one invocation, redirects included."""
    inv = _brace_expanded(inv)
    for redirect in inv.command.redirects:
        if redirect.target is not None:
            yield Access(redirect.target.text, "write" if redirect.writes else "read")
    if "xargs" in inv.wrappers:
        yield from _xargs_files(inv)
    program = inv.program
    if inv.words and "/" in inv.words[0].text:
        yield Access(inv.words[0].text, "exec")  # the program file itself
    if program in _NO_FILES:
        return
    if program == "git":
        yield from _git_paths(inv)
        return
    operands = _operands(inv)
    if program in ("sed", "dd", "tar", "find", "fd"):
        yield from _SPECIAL[program](inv, operands)
        return
    if program in _FIRST_NOT_PATH and operands and not _has_pattern_option(inv):
        operands = operands[1:]
    runs_script = program in SHELLS or program in ("source", ".") or interpreter_family(program) is not None
    # What an unknown program does with a path is unknown: judge it as a write. So are the files of
    # an interpreter editing in place (`perl -pi -e … f`).
    writes_all = program in _WRITE_ALL or program not in KNOWN_PROGRAMS or _edits_in_place(inv)
    if inv.inline_code is not None:
        operands = [o for o in operands if o != inv.inline_code]  # the code itself is not a file
    for i, text in enumerate(operands):
        last = i == len(operands) - 1 and len(operands) > 1
        mode: Mode = "read"
        if writes_all or (program in _WRITE_LAST and last) or (program in _WRITE_FIRST and i == 0):
            mode = "write"
        elif runs_script and i == 0 and inv.inline_code is None:
            mode = "exec"
        yield Access(text, mode)
    yield from _option_paths(inv, unknown=program not in KNOWN_PROGRAMS)


def _brace_expanded(inv: Invocation) -> Invocation:
    """`cp {a,/etc/cron.d/x}` is `cp a /etc/cron.d/x`: operands after brace expansion (quoted too)."""
    if not any("{" in a and "}" in a for a in inv.argv[1:]):  # `{a,b}` and `{w..w}`
        return inv
    argv = [inv.argv[0]]
    for arg in inv.argv[1:]:
        argv.extend(brace_variants(arg))  # nested too; never cut short (TooComplex past its cap)
        if len(argv) > MAX_BRACE_VARIANTS:
            raise TooComplex(f"brace expansion over {MAX_BRACE_VARIANTS} words")
    return replace(inv, argv=tuple(argv))


def _edits_in_place(inv: Invocation) -> bool:
    if interpreter_family(inv.program) not in ("perl", "ruby") or inv.inline_code is None:
        return False
    return any(a.startswith("-") and not a.startswith("--") and "i" in a for a in inv.argv[1:])


def uses_cwd(inv: Invocation) -> bool:
    """Whether the program works in its current directory (so *where* it runs matters)."""
    return inv.program not in _NO_FILES


def _has_pattern_option(inv: Invocation) -> bool:
    return any(a in ("-e", "--regexp", "-f", "--file") or a.startswith("--regexp=") for a in inv.argv[1:])


def _operands(inv: Invocation) -> list[str]:
    """Non-option words (option values included: a value that names a file is judged too)."""
    out: list[str] = []
    args = inv.argv[1:]
    skip = False
    options_done = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--" and not options_done:
            options_done = True
        elif not options_done and arg.startswith("-") and arg != "-":
            skip = arg in _TEXT_OPTIONS
        elif "://" not in arg:
            out.append(arg)
    return out


def _option_paths(inv: Invocation, *, unknown: bool) -> Iterator[Access]:
    """`--opt=/path` and `-o/path` values, and the directories and outputs of `-C dir`, `-o file`."""
    args = inv.argv[1:]
    code = _CODE_OPTIONS.get(inv.program, frozenset())
    for i, arg in enumerate(args):
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
            if name in code:
                yield Access(value, "exec")
            elif _pathlike(value):
                yield Access(value, "write" if unknown or name in _WRITE_OPTIONS else "read")
        elif arg.startswith("-") and "=" in arg and _pathlike(arg.split("=", 1)[1]):
            # `-overlay=/tmp/o.json` (go), `-Dmaven.repo.local=/tmp/r` (mvn): a single-dash option's place.
            name, value = arg.split("=", 1)
            yield Access(
                value, "exec" if name in code else "write" if unknown or name.startswith("-D") else "read"
            )
        elif arg.startswith("-") and len(arg) > 2 and arg[2:].startswith(("/", "~", "..")):
            mode: Mode = "exec" if arg[:2] in code else "read"
            yield Access(arg[2:], "write" if unknown or arg[:2] in _WRITE_OPTIONS else mode)
        elif i + 1 < len(args) and arg in code:
            yield Access(args[i + 1], "exec")
        elif i + 1 < len(args) and (
            arg in _WRITE_OPTIONS or (arg == "-d" and inv.program in ("unzip", "javac"))
        ):
            yield Access(args[i + 1], "write")


def _pathlike(text: str) -> bool:
    return (text.startswith(("/", "~", ".")) or "/" in text or UNKNOWN in text) and "://" not in text


def _sed(inv: Invocation, operands: list[str]) -> Iterator[Access]:
    in_place = any(
        a.startswith("--in-place") or (a.startswith("-") and not a.startswith("--") and "i" in a)
        for a in inv.argv[1:]
    )
    has_script_option = any(a in ("-e", "--expression", "-f", "--file") for a in inv.argv[1:])
    for text in operands if has_script_option else operands[1:]:
        yield Access(text, "write" if in_place else "read")


def _dd(inv: Invocation, operands: list[str]) -> Iterator[Access]:
    for arg in inv.argv[1:]:
        if arg.startswith(("if=", "of=")):
            yield Access(arg[3:], "write" if arg.startswith("of=") else "read")


def _tar(inv: Invocation, operands: list[str]) -> Iterator[Access]:
    args = inv.argv[1:]
    mode = args[0].lstrip("-") if args else ""
    extract = "x" in mode or "--extract" in args or "--get" in args
    create = any(c in mode for c in "cru") or "--create" in args
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
            yield Access(args[i + 1], "write" if extract else "read")
    if archive is not None:
        yield Access(archive, "write" if create else "read")
    for text in operands:
        if text not in (archive, args[0]):
            yield Access(text, "write" if extract else "read")


def _find(inv: Invocation, operands: list[str]) -> Iterator[Access]:
    """find: the search roots (written when `-delete` is present); `-exec` runs are judged apart."""
    delete = "-delete" in inv.argv
    for arg in inv.argv[1:]:
        if arg.startswith(("-", "(", "!")):
            break
        yield Access(arg, "write" if delete else "read")
    args = inv.argv
    for i, arg in enumerate(args[:-1]):
        if arg in _FIND_WRITES:
            yield Access(args[i + 1], "write")  # `-fprint FILE`, `-fprintf FILE FORMAT`, `-fls FILE`


# git short options whose value is a file git reads: -O<orderfile> (diff, log), -F<file> (commit, tag).
_GIT_FILE_OPTIONS = ("-O", "-F")


def _git_paths(inv: Invocation) -> Iterator[Access]:
    """git: `-C dir`, `--git-dir`, `--work-tree`, `--opt=path` and path-looking operands (not messages)."""
    args = inv.argv[1:]
    yield from _git_config_write(args)
    skip_next = False
    for i, arg in enumerate(args):
        if skip_next:
            skip_next = False
            continue
        if arg in ("-C", "--git-dir", "--work-tree") and i + 1 < len(args):
            yield Access(args[i + 1], "write")
            skip_next = True
        elif arg[:2] in _GIT_FILE_OPTIONS and len(arg) > 2 and arg[2:] != "-":
            yield Access(arg[2:], "read")  # attached: `git diff -O/etc/x`, `git commit -F/etc/shadow`
        elif arg in _GIT_FILE_OPTIONS and i + 1 < len(args) and args[i + 1] != "-":
            yield Access(args[i + 1], "read")  # `git commit -F /etc/shadow` reads it as the message
            skip_next = True
        elif arg.startswith("--") and "=" in arg:
            value = arg.split("=", 1)[1]
            if arg.startswith(("--git-dir=", "--work-tree=")) or _pathlike(value):
                yield Access(value, "write")
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
        elif not arg.startswith("-") and (_pathlike(arg) or (i > 0 and _secretish(arg))):
            yield Access(arg, "write")


def _git_config_write(args: tuple[str, ...]) -> Iterator[Access]:
    """`git config key value` writes .git/config (or ~/.gitconfig): keys there can run programs."""
    if "config" not in args:
        return
    rest = args[args.index("config") + 1 :]
    readonly = {"--get", "--get-all", "--get-regexp", "--list", "-l", "--show-origin", "--get-urlmatch"}
    if readonly & set(rest) or len([a for a in rest if not a.startswith("-")]) < 2:
        return
    global_scope = "--global" in rest or "--system" in rest
    yield Access("~/.gitconfig" if global_scope else ".git/config", "write")


def _secretish(text: str) -> bool:
    lowered = text.lower()
    return lowered.startswith(".env") or lowered.endswith((".pem", ".key", ".env")) or "id_rsa" in lowered


def _xargs_files(inv: Invocation) -> Iterator[Access]:
    """`xargs -a FILE`, `--arg-file=FILE`: xargs reads its arguments from that file."""
    words = [w.text for w in inv.command.words]
    for i, text in enumerate(words[:-1]):
        if text in ("-a", "--arg-file"):
            yield Access(words[i + 1], "read")
    for text in words:
        if text.startswith("--arg-file="):
            yield Access(text.split("=", 1)[1], "read")


_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})
_SPECIAL = {"sed": _sed, "dd": _dd, "tar": _tar, "find": _find, "fd": _find}
