"""Environment is code: every assignment a program sees is judged by what its name controls.

`X=1 cmd`, `env X=1 cmd`, `export X=…`/`declare -x` (or anything after `set -a`), `make X=…` and
a plain `X=…` of a name that is usually exported already (`PATH`, `HOME`, `LD_PRELOAD`…) reach the
program. Their values are judged as a program (`CC`, `*_WRAPPER`, `GIT_SSH_COMMAND`), as options
that may load code (`NODE_OPTIONS`, `PYTEST_ADDOPTS`, `*FLAGS`), as directories code is loaded
from (`PATH`, `PYTHONPATH`), or as a place written (`*_DIR`, `HOME`, `TMPDIR`); a name known to be
harmless (`CI`, `NO_COLOR`, `LANG`) is fine and any other name asks. Destroying a system directory
through a value (`CARGO_TARGET_DIR=/ cargo clean`) is the floor's (floor/effects.py).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

from approvals.permissions.model import Finding
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.variables import HARMLESS_PROGRAMS, classify_variable, inherited
from approvals.permissions.shell.words import UNKNOWN, Word

How = Literal["prefix", "export", "plain", "make"]
JudgeText = Callable[[str], Iterator[Finding]]
JudgePath = Callable[[str, bool], Finding]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_PLAIN = re.compile(r"[A-Za-z0-9_.,+\-]{0,64}")
_SYSTEM_BINS = ("/usr/bin/", "/bin/", "/usr/local/bin/", "/opt/homebrew/bin/")
# Option words that load code, agents or plugins, or run programs, whatever the variable.
_LOADERS = (
    "--require", "--import", "--loader", "--experimental-loader", "--eval", "--print", "--inspect",
    "-javaagent", "-agentlib", "-agentpath", "-XX:OnError", "-XX:OnOutOfMemoryError", "-fplugin",
    "-specs", "-wrapper", "-toolexec", "-exec", "-overlay", "--override-ini", "--rootdir",
    "--confcutdir", "-Xplugin", "-processorpath", "-processor", "--plugin", "--config", "--rcfile",
    "--preload", "-load", "-Clinker", "-Clink-arg", "-Cllvm-args", "--eval-command", "-fuse-ld=/",
)  # fmt: skip
# Short options that load code only for some variables (`-r` requires a module in NODE_OPTIONS
# and RUBYOPT, but selects a report in PYTEST_ADDOPTS).
_SHORT_LOADERS: dict[str, frozenset[str]] = {
    "NODE_OPTIONS": frozenset({"-r", "-e", "-p", "-i"}),
    "RUBYOPT": frozenset({"-r", "-I", "-e"}),
    "PERL5OPT": frozenset({"-M", "-m", "-I", "-d", "-e", "-x"}),
    "PYTEST_ADDOPTS": frozenset({"-p", "-o", "-c"}),
    "MAKEFLAGS": frozenset({"-f", "-E", "-C", "-I"}),
    "RUSTFLAGS": frozenset({"-Z", "-L"}),
}
# JVM system properties that name code to load, a JVM's own arguments, or a library path.
_JVM_CODE_PROPERTY = re.compile(
    r"(?i)class\.loader|classloader|agent|security\.(manager|policy)|library\.path|ext\.dirs|"
    r"boot\.class\.path|script|plugin|init\.script|toolchain|wrapper"
)
_WRITE_OPTIONS = frozenset(
    {"--basetemp", "--target-dir", "--out-dir", "--outdir", "--site-dir", "--build-dir"}
)


@dataclass(frozen=True, slots=True)
class Assignment:
    """One variable a program will see, and how it was set."""

    name: str
    value: Word
    how: How


def assignments(inv: Invocation, exported: frozenset[str], allexport: bool) -> Iterator[Assignment]:
    """Every assignment that reaches this invocation's program."""
    own = {id(v) for _, v in inv.command.prefix}
    for name, value in inv.command.environment:
        if id(value) in own:
            yield Assignment(name, value, "prefix")
        elif allexport or name in exported or inherited(name):
            yield Assignment(name, value, "export")
    if "env" in inv.wrappers:
        start = len(inv.command.words) - len(inv.words)
        for word in inv.command.words[1 : max(start, 0)]:
            name, eq, _ = word.text.partition("=")
            if eq and _NAME.fullmatch(name):
                yield Assignment(name, replace(word, text=word.text.split("=", 1)[1]), "prefix")
    if inv.program == "cmake":
        yield from _cmake_definitions(inv)
    if inv.program in ("make", "gmake"):
        for word in inv.words[1:]:
            name, eq, _ = word.text.partition("=")
            bare = name.rstrip("+:?!")
            # `.SHELLFLAGS=-c…` is a make variable too (its name starts with a dot).
            if eq and not word.text.startswith("-") and _NAME.fullmatch(bare.removeprefix(".")):
                value = replace(word, text=word.text.split("=", 1)[1])
                yield Assignment(bare, value, "make")


def _cmake_definitions(inv: Invocation) -> Iterator[Assignment]:
    """`cmake -DCMAKE_C_COMPILER=/tmp/cc`: cache entries that name programs, code or places."""
    words = inv.words[1:]
    for i, word in enumerate(words):
        text = word.text[2:] if word.text.startswith("-D") else None
        if text == "" and i + 1 < len(words):
            text = words[i + 1].text
        if not text or "=" not in text:
            continue
        name = text.split("=", 1)[0].split(":", 1)[0]
        if _NAME.fullmatch(name) and classify_variable(name) not in ("unknown", "harmless"):
            yield Assignment(name, replace(word, text=text.split("=", 1)[1]), "make")


def computed_export(inv: Invocation) -> Finding | None:
    """`declare -x "$name=$value"`, `export "$x"`: a variable whose name or value is not known."""
    exporting = inv.program == "export" or (
        inv.program in ("declare", "typeset", "local", "readonly")
        and any(a.startswith("-") and "x" in a for a in inv.argv)
    )
    if exporting and any(UNKNOWN in a.split("=", 1)[0] for a in inv.argv[1:] if not a.startswith("-")):
        return Finding("ask", "medium", "risk", f"{inv.program} exports a variable named at run time")
    return None


def nameref(inv: Invocation) -> Finding | None:
    """`declare -n r=HOME`: `$r` then means another variable, which a reader of the text cannot follow.

    Every later `$r` would be judged as the literal word `HOME`; so the nameref itself asks.
    """
    if inv.program in ("declare", "typeset", "local") and any(
        a.startswith("-") and not a.startswith("--") and "n" in a[1:] for a in inv.argv[1:]
    ):
        return Finding(
            "ask", "high", "risk", f"{inv.program} -n makes a variable name another one", broad=True
        )
    return None


def exported_names(invocations: tuple[Invocation, ...]) -> tuple[frozenset[str], bool]:
    """Names an `export`/`declare -x` marks, and whether `set -a` exports every assignment."""
    names: set[str] = set()
    allexport = False
    for inv in invocations:
        args = inv.argv[1:]
        if inv.program == "set" and any(a.startswith("-") and "a" in a[1:] for a in args):
            allexport = True
        if inv.program == "set" and "allexport" in args:
            allexport = True
        exporting = inv.program == "export" or (
            inv.program in ("declare", "typeset", "local", "readonly")
            and any(a.startswith("-") and "x" in a for a in args)
        )
        if exporting:
            names.update(a.split("=", 1)[0] for a in args if not a.startswith("-"))
    return frozenset(names), allexport


def judge_assignment(a: Assignment, judge_text: JudgeText, judge_path: JudgePath) -> Iterator[Finding]:
    """Findings for one assignment (nothing for a harmless one)."""
    klass = classify_variable(a.name)
    shown = f"{a.name}={a.value.text.replace(UNKNOWN, '$?')}"[:120]
    if klass == "harmless":
        return
    if klass == "remote":
        yield Finding("ask", "high", "risk", f"sets {a.name}, which points a tool at another machine",
                      egress=True, broad=True)  # fmt: skip
    elif klass == "code":
        reason = f"sets {a.name}, which changes what code loads or runs ({shown})"
        yield Finding("ask", "high", "risk", reason, broad=True)
    elif klass == "program":
        yield from _program(a, shown, judge_text)
    elif klass == "options":
        yield from _options(a, shown, judge_path)
    elif klass == "pathlist":
        yield from _pathlist(a, judge_path)
    elif klass == "path":
        yield from _path(a, shown, judge_path)
    elif a.how != "make" or not _plain_value(a.value.text):
        # A make variable of no known kind (`V=1`, `O=build`) with a plain value only tunes the recipe.
        reason = f"sets {a.name}, a variable the engine does not know (environment is code)"
        yield Finding("ask", "medium", "risk", reason)


def _plain_value(text: str) -> bool:
    return UNKNOWN not in text and _PLAIN.fullmatch(text) is not None


def _program(a: Assignment, shown: str, judge_text: JudgeText) -> Iterator[Finding]:
    text = a.value.text
    if a.name in ("LESSOPEN", "LESSCLOSE"):
        text = text.lstrip("|-")  # `|cmd %s`, `||cmd %s`, `|-cmd %s`: less pipes from the command
    if UNKNOWN in text or not text.strip():
        yield Finding("ask", "high", "risk", f"sets {a.name} to a program computed at run time", broad=True)
        return
    head, *rest = text.split()
    simple = all(r.startswith("-") and "/" not in r for r in rest)
    known_place = "/" not in head or head.startswith(_SYSTEM_BINS)
    if posixpath.basename(head) in HARMLESS_PROGRAMS and known_place and simple:
        return
    # The value runs: judge it as the command it is (floor included), and never allow it blindly.
    yield from judge_text(text)
    yield Finding("ask", "medium", "risk", f"sets {a.name}, which names the program a tool runs ({shown})",
                  broad=True)  # fmt: skip


def _options(a: Assignment, shown: str, judge_path: JudgePath) -> Iterator[Finding]:
    text = a.value.text
    if UNKNOWN in text:
        yield Finding("ask", "high", "risk", f"sets {a.name} to options computed at run time", broad=True)
        return
    shorts = _SHORT_LOADERS.get(a.name, frozenset())
    tokens = text.split()
    for i, token in enumerate(tokens):
        option, eq, value = token.partition("=")
        loader = token.startswith(_LOADERS) or token[:2] in shorts or _loading_property(option, value)
        if token[:2] == "-p" and (token[2:] or (tokens[i + 1] if i + 1 < len(tokens) else "")).startswith(
            "no:"
        ):
            loader = False  # `-p no:cacheprovider` turns a plugin off
        if token in ("-C", "-Z") and i + 1 < len(tokens) and tokens[i + 1].startswith(("link", "llvm")):
            loader = True
        if a.name in ("MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS") and eq and _NAME.fullmatch(option):
            loader = True  # `MAKEFLAGS='SHELL=…'` overrides a make variable
        if loader:
            reason = f"sets {a.name} with options that load or run code ({shown})"
            yield Finding("ask", "high", "risk", reason, broad=True)
            return
        place = value if eq else (token[2:] if token.startswith("-") else token)
        if place.startswith(("/", "~", "..")):
            yield judge_path(place, option in _WRITE_OPTIONS)


def _loading_property(option: str, value: str) -> bool:
    """`-Dorg.gradle.jvmargs=-javaagent:x`, `-Djava.system.class.loader=…`: a property that loads code."""
    if not option.startswith("-D"):
        return False
    if "jvmargs" in option.lower() or "jvm.options" in option.lower():
        # `-Dorg.gradle.jvmargs=-Xmx2g` only sizes the daemon; a loader among its words loads code.
        return any(w.lstrip("\"'").startswith(_LOADERS) for w in value.split())
    return value.lstrip("\"'").startswith(_LOADERS) or bool(_JVM_CODE_PROPERTY.search(option))


def _pathlist(a: Assignment, judge_path: JudgePath) -> Iterator[Finding]:
    for entry in a.value.text.split(":"):
        if entry == UNKNOWN and a.name in a.value.variables:
            continue  # `PATH=bin:$PATH`: the inherited value
        if a.name in ("PATH", "CDPATH") and not entry.startswith(("/", "~")):
            # An empty or relative entry is looked up from whatever directory each command runs in.
            yield Finding(
                "ask", "high", "risk", f"{a.name} has a relative entry ({entry or 'empty'})", broad=True
            )
            continue
        if not entry:
            continue
        finding = judge_path(entry, False)
        if finding.verdict != "allow":
            reason = f"{a.name} loads code from outside the workspace ({entry.replace(UNKNOWN, '$?')})"
            yield Finding(finding.verdict, "high", finding.layer, reason, rule=finding.rule,
                          sensitive=finding.sensitive, broad=True)  # fmt: skip


def _path(a: Assignment, shown: str, judge_path: JudgePath) -> Iterator[Finding]:
    finding = judge_path(a.value.text, True)
    if finding.verdict == "allow":
        return
    reason = f"{shown}: the program reads or writes there ({finding.reason})"
    yield Finding(finding.verdict, finding.risk, finding.layer, reason, rule=finding.rule,
                  sensitive=finding.sensitive)  # fmt: skip
