"""Options and inputs that run code are code: the flags of known programs that run, load or reach out.

Each check is a table lookup over the argv; what a flag runs as shell text (`git rebase -x`,
`git bisect run`) is opened by `shell/interpreters.py` and judged as a command of its own.
"""

from __future__ import annotations

import re

from approvals.permissions.model import RiskInfo
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.words import UNKNOWN

# sqlite3 dot-commands and SQL functions that run programs, load code or touch other files.
_SQLITE_CODE = re.compile(
    r"(?im)^[ \t]*\.(shell|system|load|once|output|import|read|open|backup|save|restore|excel)\b"
)
_SQLITE_SQL = re.compile(
    r"(?i)\b(load_extension|edit|writefile|readfile|fts3_tokenizer)\s*\(|\battach\b|\bvacuum\s+into\b"
)
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
    if program == "split" and any(a.startswith("--filter") for a in args):
        return RiskInfo("high", "split --filter runs a command for every piece", runs_code=True)
    if program in ("wc", "du", "sort") and any(a.startswith("--files0-from") for a in args):
        return RiskInfo("high", f"{program} reads file names from a file (what it reads is not shown)")
    if program in ("tar", "bsdtar") and _remote_archive(args):
        return RiskInfo("high", "tar archive on another host (host:path)", egress=True, broad=True)
    if program == "fzf" and any(a.startswith(("--preview", "--bind", "--with-shell")) for a in args):
        return RiskInfo("high", "fzf runs the commands its options name", runs_code=True)
    if program == "hostname" and any(not a.startswith("-") for a in args):
        return RiskInfo("high", "sets the machine's hostname")
    if program in ("fd", "fdfind") and any(a in ("-x", "--exec", "-X", "--exec-batch") for a in args):
        return RiskInfo("high", "fd runs a command for every file it finds", runs_code=True)
    if program == "ninja" and any(a in ("msvc", "browse") for a in args) and "-t" in args:
        return RiskInfo("high", "ninja tool that runs a command or a server", runs_code=True)
    return _build_option(inv, program, args)


def _build_option(inv: Invocation, program: str, args: tuple[str, ...]) -> RiskInfo | None:
    if program == "cmake":
        return _cmake(args)
    if program in ("pytest", "py.test"):
        return _pytest(args)
    if program == "ctest" and any(a.startswith(("--test-command", "--build-and-test")) for a in args):
        return RiskInfo("high", "ctest runs the command it is given", runs_code=True)
    if program in ("mvn", "mvnw", "gradle", "gradlew", "sbt", "java") and any(_jvm_code(a) for a in args):
        return RiskInfo(
            "high", f"{program} property loads an agent or names a program to run", runs_code=True
        )
    if program in ("rg", "ripgrep") and any(
        a.startswith("--pre") and not a.startswith("--pre-glob") for a in args
    ):
        return RiskInfo("high", "rg --pre runs a program on every file", runs_code=True)
    if program in ("node", "nodejs", "bun", "deno") and _node_loader(args):
        return RiskInfo("high", f"{program} loads code that is not a workspace file", runs_code=True)
    if (
        program in ("tar", "bsdtar")
        and _streams_tree(args)
        and not any(r.writes for r in inv.command.redirects)
    ):
        return RiskInfo("high", "tar streams every file below (.env included) to its output", secret=True)
    return credential_store(inv)


_LOADER_OPTIONS = ("--import", "--loader", "--experimental-loader", "--require", "-r")


def _node_loader(args: tuple[str, ...]) -> bool:
    """`node --import data:…`, `--loader https://…`: a loaded module that is not a file here."""
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in _LOADER_OPTIONS:
            value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            if ":" in value or UNKNOWN in value:
                return True
    return False


def _streams_tree(args: tuple[str, ...]) -> bool:
    """`tar cf - .`, `tar -c .` (no -f writes to standard output): the archive reaches the agent."""
    if not args or "c" not in args[0].lstrip("-") or "x" in args[0].lstrip("-"):
        return False
    archive = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-f", "--file") or a.endswith("f")]
    return archive[:1] == ["-"]


# Programs that print what a credential store holds.
_STORES: dict[str, frozenset[str]] = {
    "security": frozenset({"find-generic-password", "find-internet-password", "dump-keychain", "export"}),
    "secret-tool": frozenset({"lookup", "search"}),
    "pass": frozenset({"show", "", "otp"}), "gopass": frozenset({"show", "", "cat"}),
    "op": frozenset({"read", "item", "inject", "run"}), "bw": frozenset({"get", "list", "export"}),
    "vault": frozenset({"read", "kv", "token"}), "lpass": frozenset({"show", "export"}),
    "keyctl": frozenset({"print", "pipe", "read"}),
    "gpg": frozenset({"-d", "--decrypt", "--export-secret-keys"}),
    "age": frozenset({"-d", "--decrypt"}), "sops": frozenset({"-d", "--decrypt", "exec-env", "exec-file"}),
}  # fmt: skip


def credential_store(inv: Invocation) -> RiskInfo | None:
    """`security find-generic-password`, `pass show`, `op read`, `gpg -d`: secrets by what they print."""
    verbs = _STORES.get(inv.program)
    if verbs is None:
        return None
    first = next((a for a in inv.argv[1:] if not a.startswith("-") or a in verbs), "")
    if first in verbs or any(a in verbs for a in inv.argv[1:]):
        return RiskInfo("high", f"{inv.program} prints stored credentials", secret=True)
    return None


def _pytest(args: tuple[str, ...]) -> RiskInfo | None:
    """`pytest -o addopts=…`, `-p module`, `--pyargs`: configuration and plugins the command does not show."""
    for i, arg in enumerate(args):
        value = args[i + 1] if i + 1 < len(args) else ""
        option, eq, attached = arg.partition("=")
        if option in ("-o", "--override-ini"):
            setting = attached if eq else value
            key, _, place = setting.partition("=")
            if key.strip() == "addopts" or place.startswith(("/", "~", "..")):
                return RiskInfo("high", f"pytest -o {key} overrides its configuration", runs_code=True)
        plugin = value if arg == "-p" else (arg[2:] if arg.startswith("-p") and len(arg) > 2 else None)
        if plugin is not None and not plugin.startswith("no:"):
            return RiskInfo("medium", "pytest -p loads a plugin module by name", runs_code=True)
        if arg == "--pyargs":
            return RiskInfo("medium", "pytest --pyargs imports installed packages by name", runs_code=True)
    return None


def _jvm_code(arg: str) -> bool:
    """`-DargLine=-javaagent:…`, `-Dexec.executable=…`: a property that loads an agent or runs a program."""
    if not arg.startswith("-D") or "=" not in arg:
        return False
    key, value = arg[2:].split("=", 1)
    return any(m in value for m in _JAVA_CODE) or key.rsplit(".", 1)[-1] in ("executable", "command", "shell")


def find_writes(inv: Invocation) -> list[str]:
    """Files `find -fprint FILE` and friends write."""
    args = inv.argv
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a in _FIND_WRITES]


def _sqlite(inv: Invocation) -> RiskInfo | None:
    texts = [a for a in inv.argv[1:] if not a.startswith("-")][1:]
    texts += [inv.argv[i + 1] for i, a in enumerate(inv.argv[:-1]) if a in ("-cmd",)]
    if inv.command.stdin in ("heredoc", "herestring") and inv.command.heredoc is not None:
        texts.append(inv.command.heredoc)
    elif inv.command.stdin == "pipe" or "-init" in inv.argv:
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
