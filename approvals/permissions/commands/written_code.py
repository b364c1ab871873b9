"""Configuration is code: a file written and then run or read by a tool in the same command.

`printf 'rm -rf /' > x.sh && sh x.sh`, `cat > pytest.ini <<EOF … addopts = --basetemp=/usr …`
then `pytest`, a `Makefile` then `make`, a `package.json` then `npm test`: the text written is
judged as what it is (shell, interpreter code, make recipes, package scripts, or the keys of a
tool's configuration that run programs or move where it writes). Text that is not literal (a
`cp`, `curl -o`, `$(…)`) asks, since nobody can see what will run.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from approvals.permissions.commands.tool_files import tool_files
from approvals.permissions.shell.accesses import accesses
from approvals.permissions.shell.interpreters import SHELLS, interpreter_family
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.known import ALIASES, MODULE_PROGRAMS
from approvals.permissions.shell.words import UNKNOWN, decode_ansi_c

Absolute = Callable[[str], str]

# Configuration keys that name a program to run, or code to load.
_CODE_KEYS = frozenset(
    """rustc-wrapper rustc_wrapper rustc-workspace-wrapper linker runner script-shell pager sshcommand
    editor fsmonitor hookspath external textconv smudge clean process command cmd exec shell
    postinstall preinstall install prepare prepublish prepublishonly preprepare postprepare
    plugins entry registry index-url extra-index-url find-links trusted-host alias helper
    askpass program gpg.program sequence.editor commands commands_pre commands_post install_command
    list_dependencies_command hooks yarnpath yarn-path node-options onload-script init-module
    globalconfig userconfig preload require loader setupfiles setupfilesafterenv globalsetup
    globalteardown testenvironment transform reporters""".split()  # noqa: SIM905
)
# Keys whose value is a directory the tool writes into (and may wipe): judged as that option.
_PLACE_KEYS = {
    "basetemp": "--basetemp", "target-dir": "--target-dir", "target_dir": "--target-dir",
    "site_dir": "--site-dir", "site-dir": "--site-dir", "build-dir": "--build-dir",
    "build_dir": "--build-dir", "cache_dir": "--cache-dir", "cache-dir": "--cache-dir",
    "worktree": "--work-tree", "outdir": "--outdir", "out-dir": "--out-dir",
}  # fmt: skip
# Build-file constructs that run programs, delete or download (CMake, Maven).
_BUILD_CODE = re.compile(
    r"(?i)execute_process|exec_program|add_custom_command|add_custom_target|file\s*\(\s*(remove|download|write)|"
    r"exec-maven-plugin|maven-antrun-plugin|<executable>|<argLine>|<repositor|<pluginRepositor|groovy|<script>"
)
# Compilers and builds: what they write is derived from workspace sources (`gcc -o app && ./app`).
_BUILDERS = frozenset(
    """gcc g++ cc c++ clang clang++ rustc javac kotlinc scalac go cargo tsc esbuild webpack rollup vite
    zig swiftc ld as nasm make gmake cmake ninja meson mvn mvnw gradle gradlew sbt dotnet""".split()  # noqa: SIM905
)
# Writes that change a file's mode or times, never its text.
_MODE_ONLY = frozenset({"chmod", "chown", "chgrp", "touch", "setfacl", "chattr"})
_KEY = re.compile(r"""^[ \t]{0,64}["']?([A-Za-z0-9_.\-]{1,64})["']?[ \t]{0,16}[=:][ \t]{0,16}(.{0,2000})$""")
_MAKE_REF = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]{0,63})[)}]")
_MAKE_SHELL = re.compile(r"\$\(shell[ \t]([^)]{0,2000})\)")
_MAX_TEXT = 64 * 1024
# Files read as data whose few constructs run code, download or load it from elsewhere.
_SCANNED = {
    "cargo": re.compile(
        r"(?im)^\s*(build|links|rustc-wrapper|linker|runner)\s*=|path\s*=\s*[\"']\s*(/|~|\.\.)|"
        r"\bgit\s*=|registry|^\s*\[(patch|replace|target)\b"
    ),
    "gomod": re.compile(r"(?im)^\s*(replace|toolchain|godebug|tool)\b"),
    "gitattributes": re.compile(r"(?i)\b(filter|diff|merge|textconv)\s*=|\bworking-tree-encoding"),
    "rspec": re.compile(r"(?m)(^|\s)(-r|--require|-I|--default-path|--options)\b|\S*/"),
}
_SCANNED_WHAT = {
    "cargo": "names build scripts, linkers, path or git dependencies",
    "gomod": "replaces modules or selects a toolchain (code from elsewhere)",
    "gitattributes": "names filter, diff or merge drivers (programs git runs)",
    "rspec": "loads code or options from other files",
}


@dataclass(frozen=True, slots=True)
class Written:
    """A file a command writes, and its literal text when the command shows it (else None)."""

    path: str
    text: str | None


def written(inv: Invocation, absolute: Absolute) -> Iterator[Written]:
    """Files this invocation writes, with the text when it is literal (`cat <<EOF >f`, `printf … >f`)."""
    literal = _literal_output(inv)
    for redirect in inv.command.redirects:
        if redirect.writes and redirect.target is not None and UNKNOWN not in redirect.target.text:
            yield Written(absolute(redirect.target.text), literal)
    redirected = {r.target.text for r in inv.command.redirects if r.target is not None}
    for access in accesses(inv):
        if inv.program in _MODE_ONLY or inv.program in _BUILDERS:
            break  # a mode change, or output compiled from the workspace's own sources
        if access.write and UNKNOWN not in access.text and access.text not in redirected:
            yield Written(absolute(access.text), _tee_input(inv) if inv.program == "tee" else None)
    if inv.program == "npm" and inv.argv[1:3] in (("pkg", "set"), ("pkg", "delete"), ("pkg", "fix")):
        yield Written(absolute("package.json"), None)  # `npm pkg set scripts.test=…`
    if inv.program == "patch" or (inv.program == "git" and any(a in ("apply", "am") for a in inv.argv[1:4])):
        yield Written("*", None)  # a patch may write any file: what it writes is not shown
    if inv.inline_code:
        # Interpreter code may write any file it names: its content is not known.
        for name in re.findall(r"""['"]([^'"\n]{1,200})['"]""", inv.inline_code):
            yield Written(absolute(name), None)


def compiles(inv: Invocation) -> bool:
    """A compiler or build: what it writes is derived from the workspace's own sources."""
    return inv.program in _BUILDERS


def runs_listed_code(inv: Invocation) -> bool:
    """`find … -exec sh {} ;`, `… | xargs bash`: code files named at run time."""
    runs = inv.program in SHELLS or inv.program in ("source", ".", "make") or interpreter_family(inv.program)
    return inv.extra_args and bool(runs)


def loaded(inv: Invocation, absolute: Absolute) -> Iterator[tuple[str, str]]:
    """(absolute path or basename pattern, kind) of every file this invocation runs or reads as config."""
    program = _tool(inv)
    module_mode = interpreter_family(inv.program) == "python" and "-m" in inv.argv
    for access in accesses(inv):
        # `python -m py_compile a.py`: the module runs; its operands are its data, not code.
        if access.mode == "exec" and UNKNOWN not in access.text and not module_mode:
            yield absolute(access.text), _exec_kind(inv, access.text)
    if program in ("pytest", "unittest"):
        # Test files are code the runner imports.
        for arg in inv.argv[1:]:
            if arg.split("::", 1)[0].endswith(".py") and UNKNOWN not in arg:
                yield absolute(arg.split("::", 1)[0]), "python"
    yield from tool_files(program)
    if program != inv.program:
        yield from tool_files(inv.program)  # `python -m pytest`: python's start-up files too


def _tool(inv: Invocation) -> str:
    program = ALIASES.get(inv.program, inv.program)
    if interpreter_family(program) == "python" and "-m" in inv.argv[:-1]:
        module = inv.argv[inv.argv.index("-m") + 1]
        return MODULE_PROGRAMS.get(module, module)
    return "pytest" if program == "py.test" else program


def _exec_kind(inv: Invocation, path: str) -> str:
    if inv.program in SHELLS or inv.program in ("source", "."):
        return "shell"
    family = interpreter_family(inv.program)
    if family is not None:
        return family
    if inv.program in ("make", "gmake"):
        return "make"
    return "script"  # `./x.sh`: the shebang decides


def matches(written_path: str, load: str) -> bool:
    """A loaded absolute path, or a config basename pattern, names the written file."""
    if written_path == "*":
        return True
    if load.startswith("/"):
        return written_path == load
    return fnmatch.fnmatchcase(posixpath.basename(written_path), load)


def _tee_input(inv: Invocation) -> str | None:
    """What `tee FILE` copies: a here-document, or the literal output of `echo`/`printf` piped in."""
    if inv.command.stdin in ("heredoc", "herestring"):
        return inv.command.heredoc
    upstream = inv.command.upstream
    if inv.command.stdin != "pipe" or not upstream or any(UNKNOWN in a for a in upstream):
        return None
    return _printed(posixpath.basename(upstream[0]), list(upstream[1:]))


def _printed(program: str, args: list[str]) -> str | None:
    if program == "echo":
        flags = [a for a in args if a in ("-n", "-e", "-E", "-ne", "-en")]
        text = " ".join(args[len(flags) :])
        return decode_ansi_c(text) if any("e" in f for f in flags) else text
    if program == "printf" and args[:1] == ["--"]:
        args = args[1:]
    if program == "printf" and args:
        return _printf(args[0], args[1:])
    return None


def _literal_output(inv: Invocation) -> str | None:
    """The text `cat <<EOF`, `echo …` or `printf …` sends to its redirect, when every word is literal."""
    if not all(w.plain and UNKNOWN not in w.text for w in inv.words):
        return None
    args = list(inv.argv[1:])
    if inv.program in ("cat", "tee") and inv.command.stdin in ("heredoc", "herestring"):
        operands = [a for a in args if not a.startswith("-")]
        return inv.command.heredoc if inv.program == "tee" or not operands or operands == ["-"] else None
    return _printed(inv.program, args)


def _printf(fmt: str, args: list[str]) -> str | None:
    slots = len(re.findall(r"%[sb]", fmt))
    if re.search(r"%(?![sb%])", fmt):
        return None
    if slots == 0:
        return decode_ansi_c(fmt.replace("%%", "%"))
    chunks = [args[i : i + slots] for i in range(0, max(len(args), 1), slots)]
    out = []
    for chunk in chunks:
        out.append(_fill(fmt, iter(chunk)))
    return decode_ansi_c("".join(out))


def _fill(fmt: str, values: Iterator[str]) -> str:
    return re.sub(r"%([sb%])", lambda m: "%" if m.group(1) == "%" else next(values, ""), fmt)


def shebang_kind(text: str) -> str:
    """`#!/usr/bin/env python3` → python; no shebang (or a shell) → shell."""
    first = text.lstrip().split("\n", 1)[0]
    if not first.startswith("#!"):
        return "shell"
    words = first[2:].split()
    name = posixpath.basename(words[1] if words and posixpath.basename(words[0]) == "env" and len(words) > 1
                              else (words[0] if words else "sh"))  # fmt: skip
    return interpreter_family(name) or "shell"


def make_commands(text: str) -> tuple[list[str], bool]:
    """Recipe lines and `$(shell …)` texts of a makefile; True when it sets SHELL or .SHELLFLAGS."""
    commands: list[str] = []
    sets_shell = False
    for line in text[:_MAX_TEXT].splitlines():
        stripped = line.strip()
        if re.match(r"(SHELL|\.SHELLFLAGS|MAKESHELL)\s*[:?+!]?=", stripped):
            sets_shell = True
        commands.extend(_MAKE_SHELL.findall(line))
        if line.startswith("\t"):
            recipe = stripped.lstrip("@-+ ")
            commands.append(_MAKE_REF.sub(r"$\1", recipe))
    return commands, sets_shell


def package_scripts(text: str) -> list[str] | None:
    """Every script of a literal package.json (all of them: `npm test` may run pre/post hooks)."""
    try:
        data = json.loads(text[:_MAX_TEXT])
    except ValueError:
        return None
    scripts = data.get("scripts", {}) if isinstance(data, dict) else {}
    if not isinstance(scripts, dict):
        return None
    return [v for v in scripts.values() if isinstance(v, str)]


def config_keys(text: str) -> Iterator[tuple[str, str, str | None]]:
    """(key, value, option) for keys that run programs (option None) or move where a tool writes."""
    for line in text[:_MAX_TEXT].splitlines():
        match = _KEY.match(line)
        if match is None:
            if "--basetemp" in line:
                yield "line", line.strip(), "addopts"
            continue
        key, value = match.group(1).lower(), match.group(2).strip().strip("\"',")
        last = key.rsplit(".", 1)[-1]
        if last in _PLACE_KEYS:
            yield key, value, _PLACE_KEYS[last]
        elif last == "addopts" or "--basetemp" in value:
            yield key, value, "addopts"
        elif (
            last in _CODE_KEYS
            or value.startswith("!")
            or key.startswith(("alias", "filter.", "diff.", "core."))
        ):
            yield key, value, None


def written_commands(inv: Invocation, name: str, kind: str, text: str) -> Iterator[str]:
    """Shell texts to judge for a literal file the invocation runs or reads ("ask:…" for a plain ask)."""
    if kind == "shell":
        yield text
    elif kind == "make":
        commands, sets_shell = make_commands(text)
        if sets_shell:
            yield f"ask:{name} written in the same command sets the shell make runs recipes with"
        yield from commands
    elif kind == "package":
        scripts = package_scripts(text)
        if scripts is None:
            yield f"ask:{name} written in the same command is not plain JSON"
        else:
            yield from scripts
    elif kind in _SCANNED:
        found = _SCANNED[kind].search(text[:_MAX_TEXT])
        if found is not None:
            yield f"ask:{name} written in the same command {_SCANNED_WHAT[kind]} ({found.group(0).strip()})"
    elif kind == "tox":
        tox = tox_commands(text)
        if tox is None:
            yield f"ask:{name} written in the same command is not plain tox configuration"
        else:
            yield from tox
    elif kind == "opaque" or (kind in ("cmake", "pom") and _BUILD_CODE.search(text[:_MAX_TEXT])):
        yield f"ask:{name} written in the same command is build code that can run programs"
    elif kind in ("cmake", "pom"):
        return
    elif kind == "config":
        yield from _config_commands(inv, name, text)
    else:
        delimiter = "MASSGEN_WRITTEN_EOF"
        while delimiter in text:
            delimiter += "_"
        yield f"{kind} <<'{delimiter}'\n{text}\n{delimiter}"


def _config_commands(inv: Invocation, name: str, text: str) -> Iterator[str]:
    """Options a configuration file adds to the tool's command line, and programs its keys run."""
    for key, value, option in config_keys(text):
        if option == "addopts":
            yield f"{inv.text} {value}"
        elif option is not None:
            yield f"{inv.text} {option}={value}"
        else:
            yield f"ask:{name} written in the same command sets {key}, which runs a program or loads code"
            if value.strip().lstrip("!"):
                yield value.lstrip("!")


def tox_commands(text: str) -> list[str] | None:
    """The shell commands of a literal tox.ini or tox.toml (`commands = …` and continuation lines)."""
    keys = ("commands", "commands_pre", "commands_post", "install_command", "list_dependencies_command")
    if re.search(r"(?m)^\s*(\[|[A-Za-z_.]+\s*=\s*\[)", text) and "=" in text and "[[" in text:
        return _toml_commands(text, keys)
    commands: list[str] = []
    current = False
    for line in text[:_MAX_TEXT].splitlines():
        match = _KEY.match(line)
        if match is not None and not line[:1].isspace():
            current = match.group(1).lower() in keys
            value = match.group(2).strip()
        elif current and line[:1].isspace():
            value = line.strip()
        else:
            current = current and not line.strip().startswith("[")
            continue
        if current and value and not value.startswith("#"):
            commands.append(value.lstrip("-! ").replace("{posargs}", "").replace("{envpython}", "python"))
    return commands


def _toml_commands(text: str, keys: tuple[str, ...]) -> list[str] | None:
    try:
        data = tomllib.loads(text[:_MAX_TEXT])
    except tomllib.TOMLDecodeError:
        return None
    out: list[str] = []
    stack: list[object] = [data]
    while stack and len(out) < 256:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in keys and isinstance(value, list):
                    out.extend(" ".join(str(w) for w in c) if isinstance(c, list) else str(c) for c in value)
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return out
