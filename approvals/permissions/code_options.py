"""Options and inputs that run code are code: the flags of known programs that run, load or reach out.

Each check is a table lookup over the argv; what a flag runs as shell text (`git rebase -x`,
`git bisect run`) is opened by `shell/interpreters.py` and judged as a command of its own.
"""

from __future__ import annotations

import re

from approvals.permissions.riskinfo import RiskInfo
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.words import UNKNOWN

# sqlite3 dot-commands and SQL functions that run programs, load code or touch other files.
_SQLITE_CODE = re.compile(
    r"(?im)^[ \t]*\.(shell|system|load|once|output|import|read|open|backup|save|restore|excel)\b"
)
_SQLITE_SQL = re.compile(r"(?i)\b(load_extension|edit|writefile|readfile|fts3_tokenizer)\s*\(|\battach\b")
_SQLITE_VALUED = frozenset({"-cmd", "-init", "-separator", "-newline", "-nullvalue", "-vfs", "-lookaside"})
# Compiler options that run another program or load a plugin.
_CC_CODE = ("-wrapper", "-fplugin", "-specs", "-B", "--specs", "-fuse-ld=/", "-Xclang=-load", "-Xclang")
_CC = frozenset({"gcc", "g++", "cc", "c++", "clang", "clang++"})
# JVM options that load agents or run a command on an event.
_JAVA_CODE = (
    "-javaagent",
    "-agentlib",
    "-agentpath",
    "-XX:OnError",
    "-XX:OnOutOfMemoryError",
    "-Xbootclasspath",
)
_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})


def code_option(inv: Invocation) -> RiskInfo | None:
    """A flag or input of a known program that runs code, loads code or names a remote; else None."""
    program, args = inv.program, inv.argv[1:]
    if program == "sqlite3":
        return _sqlite(inv)
    if program in _CC and any(a.startswith(_CC_CODE) for a in args):
        return RiskInfo("high", f"{program} option runs another program or loads a plugin", runs_code=True)
    if program in ("java", "javac", "kotlin", "kotlinc") and any(a.startswith(_JAVA_CODE) for a in args):
        return RiskInfo("high", f"{program} option loads an agent or runs a command", runs_code=True)
    if program == "rustc" and any(a.startswith(("-Clink", "linker=", "link-arg", "-Zplugin")) for a in args):
        return RiskInfo("high", "rustc option runs another linker or loads a plugin", runs_code=True)
    if program in ("sort",) and any(a.startswith("--compress-program") for a in args):
        return RiskInfo("high", "sort --compress-program runs a program", runs_code=True)
    if program in ("wc", "du", "sort") and any(a.startswith("--files0-from") for a in args):
        return RiskInfo("high", f"{program} reads file names from a file (what it reads is not shown)")
    if program in ("tar", "bsdtar") and _remote_archive(args):
        return RiskInfo("high", "tar archive on another host (host:path)", egress=True, broad=True)
    if program == "ninja" and any(a in ("msvc", "browse") for a in args) and "-t" in args:
        return RiskInfo("high", "ninja tool that runs a command or a server", runs_code=True)
    if program == "cmake":
        return _cmake(args)
    return None


def find_writes(inv: Invocation) -> list[str]:
    """Files `find -fprint FILE` and friends write."""
    args = inv.argv
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a in _FIND_WRITES]


def _sqlite(inv: Invocation) -> RiskInfo | None:
    texts = [a for a in inv.argv[1:] if not a.startswith("-")][1:]
    texts += [inv.argv[i + 1] for i, a in enumerate(inv.argv[:-1]) if a in ("-cmd",)]
    if inv.command.stdin in ("heredoc", "herestring") and inv.command.heredoc is not None:
        texts.append(inv.command.heredoc)
    elif inv.command.stdin in ("pipe", "file") or "-init" in inv.argv:
        return RiskInfo(
            "medium", "sqlite3 runs statements it reads at run time (dot-commands can run programs)"
        )
    for text in texts:
        if UNKNOWN in text:
            return RiskInfo("high", "sqlite3 statements computed at run time", runs_code=True)
        found = _SQLITE_CODE.search(text) or _SQLITE_SQL.search(text)
        if found:
            what = found.group(0).strip()
            return RiskInfo(
                "high", f"sqlite3 {what} runs programs, loads code or opens other files", runs_code=True
            )
    return None


def _remote_archive(args: tuple[str, ...]) -> bool:
    if "--force-local" in args:
        return False
    archives = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-f", "--file")]
    archives += [a.split("=", 1)[1] for a in args if a.startswith("--file=")]
    if args and not args[0].startswith("-") and "f" in args[0] and len(args) > 1:
        archives.append(args[1])
    return any(":" in a.split("/", 1)[0] for a in archives)


_CMAKE_E_SAFE = frozenset(
    """echo echo_append copy copy_directory copy_if_different copy_directory_if_different make_directory
    rm remove remove_directory rename touch touch_nocreate tar sha1sum sha256sum sha512sum md5sum
    compare_files true false sleep capabilities create_symlink create_hardlink cat""".split()  # noqa: SIM905
)


def _cmake(args: tuple[str, ...]) -> RiskInfo | None:
    if "--install" in args:
        return RiskInfo("medium", "cmake --install writes outside the build tree")
    if "-E" not in args:
        return None
    tool = args[args.index("-E") + 1] if args.index("-E") + 1 < len(args) else ""
    if tool == "environment":
        return RiskInfo("high", "dumps environment variables (may contain secrets)", secret=True)
    if tool in _CMAKE_E_SAFE:
        return None
    return RiskInfo("high", f"cmake -E {tool} runs a command", runs_code=True)
