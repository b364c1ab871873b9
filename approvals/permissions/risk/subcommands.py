"""Allow only what is known: a program with subcommands is low risk only for a known local one.

`mvn test` is a build; `mvn deploy`, `npm token`, `cargo +nightly publish`, `npm --prefix x publish`
are not, and a subcommand nobody listed asks (medium) with the reason `unknown subcommand: …`.
"""

from __future__ import annotations

import posixpath
import re
import sys
from collections.abc import Callable
from dataclasses import replace

from approvals.permissions.model import RiskInfo
from approvals.permissions.shell.interpreters import SHELLS, interpreter_family, with_inline_code
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.known import (
    ALIASES,
    MODULE_PROGRAMS,
    SIDE_EFFECT_NAMES,
    STDLIB_MODULES,
    TOOLS,
    Tool,
)
from approvals.permissions.shell.programs import NETWORK_MODULES, PUBLISH
from approvals.permissions.shell.words import UNKNOWN

Classify = Callable[[Invocation], RiskInfo]
# Programs whose option values are text or patterns, never commands.
_TEXT_PROGRAMS = frozenset({"echo", "printf", "grep", "egrep", "fgrep", "rg", "ag", "sed", "awk", "jq", "yq"})
_QUESTIONS = frozenset({"--version", "-v", "-V", "--help", "-h"})
_COMMANDISH = frozenset({"rm", "curl", "wget", "nc", "eval", "exec", "env", "sudo", "xargs", "ssh", "dd"})


def canonical_program(program: str) -> str:
    """`mvnw` is mvn, `gradlew` is gradle: a wrapper script checked into the repository."""
    return ALIASES.get(program, program)


def operands_after(args: tuple[str, ...], tool: Tool) -> list[tuple[int, str]]:
    """(index, word) of every operand, skipping options and the values of valued options."""
    found: list[tuple[int, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        if arg in tool.valued:
            i += 2
            continue
        if not arg.startswith("-") and not (tool.skip_prefix and arg.startswith(tool.skip_prefix)):
            found.append((i, arg))
        i += 1
    return found


def subcommand(inv: Invocation, program: str) -> str:
    """The subcommand, with the program's own valued global options skipped (`npm --prefix x publish`)."""
    tool = TOOLS.get(program)
    if tool is None:
        return next((a for a in inv.argv[1:] if not a.startswith("-")), "")
    found = operands_after(inv.argv[1:], tool)
    if found:
        return found[0][1]
    # `yarn --version` is a question, not the bare `yarn` that installs.
    return next((a for a in inv.argv[1:] if a in _QUESTIONS), "")


def module_program(inv: Invocation) -> tuple[str, int] | None:
    """`python -m pytest …` → ("pytest", index of the module word); None without `-m`."""
    skip = False
    for i, arg in enumerate(inv.argv[1:], start=1):
        if skip:
            skip = False
            continue
        if arg in ("-X", "-W", "--check-hash-based-pycs"):
            skip = True  # `python -X importtime -m x`: the option's own value
            continue
        if arg == "-m" and i + 1 < len(inv.argv):
            return inv.argv[i + 1], i + 1
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:], i
        if not arg.startswith("-"):
            return None
    return None


def delegate(inv: Invocation, start: int, name: str | None = None) -> Invocation:
    """The invocation of the program an argv runs from index `start` (`bundle exec rspec` → rspec)."""
    words = inv.words[start:]
    head = name if name is not None else posixpath.basename(inv.argv[start])
    # The code an interpreter is handed inline (`yarn node -e …`) is read afresh for the new program.
    return with_inline_code(replace(inv, argv=(head, *inv.argv[start + 1 :]), words=words, inline_code=None))


def command_like_option(inv: Invocation) -> str | None:
    """An `--opt=VALUE` or `--opt VALUE` that reads as a command line (`--rsh='sh -c …'`): it may run."""
    args = inv.argv[1:]
    for i, arg in enumerate(args):
        if not arg.startswith("--") or inv.program in _TEXT_PROGRAMS:
            continue
        if "=" in arg:
            value = arg.split("=", 1)[1].strip()
        elif i + 1 < len(args) and " " in args[i + 1]:
            value, arg = args[i + 1].strip(), arg + "="
        else:
            continue
        first = posixpath.basename(value.split(" ", 1)[0]) if value else ""
        runs = first in SHELLS or first in _COMMANDISH or interpreter_family(first) is not None
        if runs and (" " in value or UNKNOWN in value):
            return arg.split("=", 1)[0]
    return None


# Third-party packages whose import runs nothing but their own definitions.
_WELL_KNOWN = frozenset(
    """__future__ pytest hypothesis numpy pandas scipy yaml toml tomli tomli_w attr attrs pydantic click
    rich typer jinja2 markupsafe packaging dateutil pytz six tqdm PIL matplotlib sklearn
    more_itertools typing_extensions""".split()  # noqa: SIM905
)
_IMPORT = re.compile(r"(?:^|[;\n])[ \t]{0,64}import[ \t]{1,16}([^;\n#]{1,500})")
_FROM = re.compile(r"(?:^|[;\n])[ \t]{0,64}from[ \t]{1,16}([A-Za-z_][A-Za-z0-9_]{0,63})")


def foreign_imports(code: str) -> list[str]:
    """Top-level modules python code imports that are not in the standard library (their code runs)."""
    names = list(_FROM.findall(code))
    for clause in _IMPORT.findall(code):
        for part in clause.split(","):
            names.append(part.strip().split(" ", 1)[0].split(".", 1)[0])
    return [m for m in names if m and m not in sys.stdlib_module_names and m not in _WELL_KNOWN]


# Libraries `perl -M…`/`ruby -r…` may load without asking: core ones that run nothing on load.
_CORE_LIBRARIES = frozenset(
    """strict warnings utf8 feature English POSIX Data::Dumper List::Util Scalar::Util JSON::PP
    File::Basename File::Spec Getopt::Long Time::HiRes Time::Local Text::Wrap Encode open
    json set yaml pp date time securerandom digest csv optparse pathname fileutils-noop""".split()  # noqa: SIM905
)


def foreign_libraries(family: str, loaded: list[str]) -> list[str]:
    """Libraries loaded by flag that are not core (`perl -MCPAN`, `ruby -rsocket`)."""
    if family not in ("perl", "ruby"):
        return []
    names = [name.split("=", 1)[0].split(",", 1)[0] for name in loaded]
    return [n for n in names if n and n not in _CORE_LIBRARIES]


def judge_path_script(inv: Invocation, family: str, classify: Classify) -> RiskInfo | None:
    """`ruby -S gem push`, `perl -S prove`: the program named after `-S` is looked up on PATH and run."""
    if family not in ("ruby", "perl") or "-S" not in inv.argv[:-1]:
        return None
    return classify(delegate(inv, inv.argv.index("-S") + 1))


_TIMEIT_VALUED = frozenset({"-n", "--number", "-r", "--repeat", "-u", "--unit"})
_TIMEIT_CODE = frozenset({"-s", "--setup"})


def timeit_code(inv: Invocation) -> str | None:
    """`python -m timeit [-s SETUP] STMT…`: its setup and statements, as one text for the code judge.

    None when the module is not timeit.
    """
    found = module_program(inv)
    if found is None or found[0] != "timeit":
        return None
    args, code, i = inv.argv[found[1] + 1 :], [], 0
    while i < len(args):
        arg = args[i]
        name, joined, value = arg.partition("=")
        if arg in _TIMEIT_VALUED or arg in _TIMEIT_CODE:
            if arg in _TIMEIT_CODE and i + 1 < len(args):
                code.append(args[i + 1])
            i += 2
            continue
        if joined and name in _TIMEIT_CODE:
            code.append(value)
        elif arg.startswith("-s") and len(arg) > 2:
            code.append(arg[2:])
        elif not arg.startswith("-"):
            code.append(arg)
        i += 1
    return "\n".join(code)


def judge_module(inv: Invocation, classify: Classify) -> RiskInfo | None:
    """`python -m MODULE`: a known tool is judged as that program, stdlib work is low, the rest asks."""
    found = module_program(inv)
    if found is None:
        return None
    module, index = found
    if module in MODULE_PROGRAMS:
        return classify(delegate(inv, index, MODULE_PROGRAMS[module]))
    if module in NETWORK_MODULES or module.split(".")[0] in ("http", "urllib", "xmlrpc", "smtpd", "ftplib"):
        return RiskInfo("high", f"network module ({module})", egress=True, broad=True)
    if module in STDLIB_MODULES:
        return RiskInfo("low", f"runs python module {module}")
    return RiskInfo("medium", f"unknown python module: python -m {module}")


_APP_SERVERS = frozenset({"uvicorn", "gunicorn", "hypercorn", "daphne"})
_SERVER_VALUED = frozenset(
    """-b --bind --host --port -w --workers -k --worker-class --log-level --timeout -t --reload-dir
    --root-path --app-dir""".split()  # noqa: SIM905
)


def _app_server(inv: Invocation) -> RiskInfo:
    """`uvicorn app:app`, `gunicorn -b :8000 pkg.wsgi`: serves a python module (the workspace's or asks)."""
    args = inv.argv[1:]
    code = [a for a in args if a.startswith(("--config", "-c", "--env-file", "--factory", "--uds", "--fd"))]
    if code:
        return RiskInfo("medium", f"{inv.program} {code[0]} loads a configuration or code file")
    modules = [
        a
        for i, a in enumerate(args)
        if not a.startswith("-") and (i == 0 or args[i - 1] not in _SERVER_VALUED)
    ]
    if len(modules) != 1:
        return RiskInfo("medium", f"{inv.program} without one application module")
    module = modules[0].split(":", 1)[0].split(".", 1)[0]
    return RiskInfo("medium", f"{inv.program} serves the python module {module}", imports=(module,))


def _session_names(args: tuple[str, ...]) -> list[str]:
    """`tox -e lint,release`, `nox -s publish`: the project environments or sessions to run."""
    names: list[str] = []
    for i, arg in enumerate(args):
        option, eq, value = arg.partition("=")
        if option in ("-e", "--env", "-s", "--session", "--sessions") and (eq or i + 1 < len(args)):
            names.extend((value if eq else args[i + 1]).split(","))
    return names


def judge_known(inv: Invocation, program: str, classify: Classify) -> RiskInfo | None:
    """Risk by the program's subcommand table; None when the program has no table."""
    if program in ("tox", "nox"):
        named = [n for n in _session_names(inv.argv[1:]) if n in SIDE_EFFECT_NAMES]
        if named:
            return RiskInfo(
                "medium", f"runs the {program} environment {named[0]!r}, whose name says it reaches out"
            )
    if program in _APP_SERVERS:
        return _app_server(inv)
    tool = TOOLS.get(program)
    if tool is None:
        return None
    args = inv.argv[1:]
    code = _code_option(args, tool)
    if code is not None:
        return RiskInfo("high", f"{program} {code} runs code or reaches out", broad=True, runs_code=True)
    if _build_file_from_stream(inv):
        reason = f"{program} reads its build file from a stream: its recipes are not in the command"
        return RiskInfo("high", reason, broad=True, runs_code=True)
    operands = operands_after(args, tool)
    runs = _runs_program(inv, program, operands)
    if runs is not None:
        return classify(runs)
    if tool.goals:
        names = [w for _, w in operands if "=" not in w]
        for name in names or [""]:
            info = _one(program, tool, name.rsplit(":", 1)[-1] if program == "gradle" else name.split(" ")[0])
            if info.risk != "low":
                return info
        return RiskInfo("low", f"local {program} {' '.join(names)}".rstrip())
    sub = operands[0][1] if operands else ""
    info = _one(program, tool, sub)
    if info.risk != "low" or not sub:
        return info
    rest = [word for _index, word in operands[1:]]
    if sub in tool.nested and rest and rest[0] not in tool.nested[sub]:
        return RiskInfo("medium", f"unknown subcommand: {program} {sub} {rest[0]}")
    if sub in ("run", "run-script") and rest and rest[0] in SIDE_EFFECT_NAMES:
        return RiskInfo("medium", f"runs the project script {rest[0]!r}, whose name says it reaches out")
    named = [w for w in rest if w in SIDE_EFFECT_NAMES]
    if sub in ("workspaces", "workspace") and named:
        # `yarn workspaces foreach run deploy`: every workspace's script of that name runs.
        return RiskInfo("medium", f"runs the project script {named[0]!r}, whose name says it reaches out")
    return _sub_options(program, sub, args) or info


def _sub_options(program: str, sub: str, args: tuple[str, ...]) -> RiskInfo | None:
    """Options that take a known subcommand beyond the workspace (`go env -w`, `pip list --outdated`)."""
    if program == "go" and sub == "env" and any(a in ("-w", "-u") for a in args):
        return RiskInfo("medium", "changes go configuration (go env -w)")
    if program == "go" and sub == "clean" and any(a in ("-modcache", "-cache", "-fuzzcache") for a in args):
        return RiskInfo("medium", "deletes Go's shared caches outside the workspace")
    if program == "rails" and _rails_environment(args) not in ("development", "test"):
        return RiskInfo("medium", f"rails {sub} on the {_rails_environment(args)} environment (not local)")
    if program == "pip" and any(a in ("--outdated", "-o", "--uptodate", "-u") for a in args):
        return RiskInfo("high", "asks the package index for newer versions", egress=True, broad=True)
    return None


def _rails_environment(args: tuple[str, ...]) -> str:
    """The environment a rails command runs in (`RAILS_ENV=x`, `-e x`, `--environment=x`)."""
    env = "development"
    for i, arg in enumerate(args):
        if arg.startswith(("RAILS_ENV=", "RACK_ENV=", "--environment=", "DATABASE_URL=")):
            env = arg.split("=", 1)[1] if not arg.startswith("DATABASE_URL=") else "DATABASE_URL"
        elif arg in ("-e", "--environment") and i + 1 < len(args):
            env = args[i + 1]
    return env


def _runs_program(inv: Invocation, program: str, operands: list[tuple[int, str]]) -> Invocation | None:
    """The program a subcommand runs (`coverage run -m x`, `yarn node f.js`, `bundle exec rspec`)."""
    if not operands:
        return None
    index, sub = operands[0]
    if program == "coverage" and sub == "run":
        return delegate(inv, index + 1, "python")  # `coverage run -m twine upload`: python runs the rest
    if program == "yarn" and sub == "node":
        return delegate(inv, index + 1)
    if program in ("bundle", "pnpm", "yarn") and sub == "exec":
        runs = [i for i, a in enumerate(inv.argv[1:]) if i > index and not a.startswith("-")]
        return delegate(inv, runs[0] + 1) if runs else None
    return None


_BUILD_FILE_OPTIONS = ("-f", "--file", "--makefile", "--rakefile", "-buildfile", "-file")
_STREAMS = ("-", "/dev/stdin")
_STREAM_PREFIXES = ("/dev/fd/", "/proc/self/fd/", "/dev/stdin")


def _build_file_from_stream(inv: Invocation) -> bool:
    """`make -f - <<EOF`, `make -f <(printf …)`: the recipes that run come from a stream, not a file."""
    words = inv.words
    for i, word in enumerate(words[1:], start=1):
        name, joined, value = word.text.partition("=")
        if joined and name in _BUILD_FILE_OPTIONS:
            target, carrier = value, word
        elif word.text in _BUILD_FILE_OPTIONS and i + 1 < len(words):
            target, carrier = words[i + 1].text, words[i + 1]
        elif word.text.startswith("-f") and len(word.text) > 2 and not word.text.startswith("--"):
            target, carrier = word.text[2:], word
        else:
            continue
        if target in _STREAMS or target.startswith(_STREAM_PREFIXES) or carrier.process_substitution:
            return True
    return False


def _one(program: str, tool: Tool, name: str) -> RiskInfo:
    if name in PUBLISH.get(program, set()):
        return RiskInfo(
            "high", f"publishes or deploys ({program} {name})", egress=True, side_effect=True, broad=True
        )
    if not name or name in tool.subs:
        return RiskInfo("low", f"local {program} {name}".rstrip())
    if tool.scripts and name not in tool.builtins and UNKNOWN not in name:
        if name in SIDE_EFFECT_NAMES:
            return RiskInfo("medium", f"runs the target {name!r}, whose name says it reaches out")
        return RiskInfo("low", f"runs the project's {program} target {name}")
    return RiskInfo("medium", f"unknown subcommand: {program} {name}")


def _code_option(args: tuple[str, ...], tool: Tool) -> str | None:
    for arg in args:
        if arg == "--":
            return None
        name = arg.split("=", 1)[0]
        if name in tool.code or any(arg.startswith(c) and len(c) == 2 for c in tool.code if c != arg):
            return name
    return None
