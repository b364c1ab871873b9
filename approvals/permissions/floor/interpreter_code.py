"""Literal interpreter code (`python -c`, `node -e`, a here-document): what it deletes or runs.

Not a parser for five languages: a linear scan for the calls that delete trees or run programs
(`shutil.rmtree`, `fs.rmSync`, `FileUtils.rm_rf`, `File::Path::remove_tree`, `os.system`,
`subprocess.run([...])`, `spawnSync`, `qx{}`), the string literals in their arguments (and in
simple `name = '…'` assignments those arguments use), judged as paths or as shell text by the floor.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

from approvals.permissions.budget import check_deadline

# Calls that delete (recursively, for the floor's purposes: a tree or a file are both lost).
_DELETE_CALLS = (
    "rmtree", "remove_tree", "rm_rf", "rm_r", "rm_f", "rmSync", "rmdirSync", "unlinkSync", "rimraf",
    "removeSync", "emptyDirSync", "emptyDir", "remove_dir", "remove_entry", "remove_entry_secure",
    "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "unlink", "rmdir", "File.delete",
    "FileUtils.rm", "FileUtils.remove", "Dir.delete", "fs.rm", "fs.promises.rm", "Deno.remove",
    "deleteRecursively", "remove_dir_all", "rm_rf_r", "send2trash", "truncate",
)  # fmt: skip
# Calls that run a program or shell text.
_RUN_CALLS = (
    "system", "popen", "Popen", "run", "call", "check_call", "check_output", "getoutput",
    "getstatusoutput", "exec", "execSync", "execFileSync", "execFile", "spawn", "spawnSync", "execv",
    "execvp", "execl", "execlp", "shell_exec", "passthru", "proc_open", "qx", "%x", "Command", "execute",
    "spawn_process", "IO.popen", "Open3.capture2", "Open3.popen3",
)  # fmt: skip
_HOME_MARKERS = (
    "Path.home()", "homedir()", "Dir.home", "ENV['HOME']", 'ENV["HOME"]', "env.HOME", "environ['HOME']",
    'environ["HOME"]', "$ENV{HOME}", "$ENV{'HOME'}", "getenv('HOME')", 'getenv("HOME")', "home_dir()",
)  # fmt: skip
# One string literal (single or double quoted, backslash escapes): linear, no backtracking.
_LITERAL = re.compile(r"""'((?:[^'\\\n]|\\.){0,4096})'|"((?:[^"\\\n]|\\.){0,4096})\"""")
_ASSIGN = re.compile(r"""(?<![\w$])[$@]?([A-Za-z_]\w{0,63})\s{0,8}=\s{0,8}(?=['"])""")
_WORD = re.compile(r"[A-Za-z_]\w{0,63}")
_MAX_CODE = 64 * 1024
_MAX_CALLS = 24


def code_reads(code: str) -> tuple[Iterator[str], Iterator[str]] | None:
    """What literal code deletes and the shell texts it runs (both lazy), or None when too long.

    The floor judges them (judge.py): this module reads code, it never decides.
    """
    if len(code) > _MAX_CODE:
        return None
    variables = _assignments(code)
    return _deleted(code, variables), _run_texts(code, variables)


def _assignments(code: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _ASSIGN.finditer(code):
        literal = _LITERAL.match(code, match.end())
        if literal is not None:
            found.setdefault(match.group(1), _unescape(literal.group(1) or literal.group(2) or ""))
    return found


def _unescape(text: str) -> str:
    return text.replace("\\\\", "\\").replace("\\'", "'").replace('\\"', '"')


def _arguments(code: str, names: tuple[str, ...]) -> Iterator[str]:
    """The argument text after each call of one of `names` (to the matching bracket, bounded)."""
    count = 0
    for name in names:
        start = code.find(name)
        while start >= 0 and count < _MAX_CALLS:
            check_deadline()
            end = start + len(name)
            before = code[start - 1] if start else " "
            after = code[end : end + 1]
            if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
                count += 1
                yield _call_text(code, end)
            start = code.find(name, end)


def _call_text(code: str, start: int) -> str:
    """From a call's name to its closing bracket (or the end of the statement), at most 1 KiB."""
    depth = 0
    limit = min(len(code), start + 1024)
    for i in range(start, limit):
        ch = code[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth <= 0:
                return code[start : i + 1]
        elif ch in ";\n" and depth == 0:
            return code[start:i]
    return code[start:limit]


def _literals(text: str, variables: dict[str, str]) -> list[str]:
    found = [_unescape(m.group(1) or m.group(2) or "") for m in _LITERAL.finditer(text)]
    stripped = _LITERAL.sub(" ", text)
    found += [variables[w] for w in _WORD.findall(stripped) if w in variables]
    if any(marker in text for marker in _HOME_MARKERS):
        found.append("~")
    return found


def _deleted(code: str, variables: dict[str, str]) -> Iterator[str]:
    deleting = False
    for arguments in _arguments(code, _DELETE_CALLS):
        deleting = True
        for literal in _literals(arguments, variables):
            if literal.startswith(("/", "~")) or literal in (".", ".."):
                yield literal
    if deleting:
        # `[shutil.rmtree(p) for p in ['/usr']]`, `Path('/etc/x').unlink()`: a deleting program's
        # other absolute literals may be what it deletes (a bare "/" is too common to count).
        for match in _LITERAL.finditer(code[:_MAX_CODE]):
            literal = _unescape(match.group(1) or match.group(2) or "")
            if literal.startswith(("/", "~")) and literal != "/":
                yield literal


def _run_texts(code: str, variables: dict[str, str]) -> Iterator[str]:
    """Shell text each run-call would run: one literal is shell text, several are an argv."""
    for arguments in _arguments(code, _RUN_CALLS):
        literals = [lit for lit in _literals(arguments, variables) if lit]
        if len(literals) == 1:
            yield literals[0]
        elif literals:
            yield " ".join(shlex.quote(lit) for lit in literals[:64])
    for start, end in (("qx{", "}"), ("qx(", ")"), ("%x(", ")"), ("%x{", "}")):
        index = code.find(start)
        if index >= 0:
            close = code.find(end, index + 3)
            yield code[index + 3 : close if close > 0 else len(code)]
