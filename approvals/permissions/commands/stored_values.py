"""Stored values bash evaluates later, and assignments made by builtins that read input.

Bash evaluates an array subscript inside a stored value whenever the value meets an arithmetic
context (`$(( ))`, `(( ))`, `let`, `[[ $n -eq 1 ]]`, a `declare -i` variable, a subscript): the
value `a[$(curl x)]` then runs `curl x`. Wherever such a value is stored (`x=`, `read`, `mapfile`,
`printf -v`, `declare`), the command inside it is judged. `read PATH`, `printf -v LD_PRELOAD …`,
`mapfile PATH` set a variable that every later command sees, from text the command may not show.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.variables import classify_variable

_ARITHMETIC = re.compile(
    r"\(\(|\blet\s|\b(declare|typeset|local|readonly)\s+-[A-Za-z]*i|"
    r"\s-(eq|ne|lt|le|gt|ge)\s|\[\s*[A-Za-z_$][^\]\s]{0,64}\]|\$\{[A-Za-z_][A-Za-z0-9_]{0,63}:"
)
# A subscript holding a command substitution: `a[$(…)]`, ``a[`…`]``, `a[\$(…)]`.
_SUBSCRIPT = re.compile(r"\[[^\]\n]{0,200}?(\$\(|`)")
_SUBSTITUTION = re.compile(r"\$\(([^()\n]{1,2000})\)|`([^`\n]{1,2000})`")
_READ_VALUED = frozenset({"-d", "-n", "-N", "-p", "-t", "-u", "-i"})
_MAPFILE_VALUED = frozenset({"-d", "-n", "-O", "-s", "-u", "-C", "-c"})


def stored_commands(text: str) -> list[str] | None:
    """Commands inside stored subscripts that an arithmetic context may evaluate; None when there are none."""
    if len(text) > 64 * 1024 or _SUBSCRIPT.search(text) is None or _ARITHMETIC.search(text) is None:
        return None
    commands: list[str] = []
    for match in _SUBSCRIPT.finditer(text):
        found = _SUBSTITUTION.search(text, match.end() - len(match.group(1)))
        if found is not None:
            commands.append((found.group(1) or found.group(2)).replace("\\", ""))
        if len(commands) >= 32:
            break
    return commands


def input_assigned(inv: Invocation) -> Iterator[str]:
    """Variables a builtin sets from its input or arguments (`read X`, `mapfile X`, `printf -v X`)."""
    args = list(inv.argv[1:])
    if inv.program == "read":
        yield from _names(args, _READ_VALUED | {"-a"}, arrays=("-a",))
    elif inv.program in ("mapfile", "readarray"):
        names = list(_names(args, _MAPFILE_VALUED, arrays=()))
        yield from names[-1:] or ["MAPFILE"]
    elif inv.program == "printf":
        for i, arg in enumerate(args[:-1]):
            if arg == "-v":
                yield args[i + 1]
            elif arg.startswith("-v") and len(arg) > 2:
                yield arg[2:]


def _names(args: list[str], valued: frozenset[str], arrays: tuple[str, ...]) -> Iterator[str]:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in arrays and i + 1 < len(args):
            yield args[i + 1]
            i += 2
        elif arg in valued:
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            yield arg
            i += 1


def sensitive(name: str) -> bool:
    """A name whose value changes what later commands run, load or where they write."""
    return classify_variable(name) not in ("harmless", "unknown")
