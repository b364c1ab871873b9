"""Commands that print the environment (where tokens live).

`env`, `printenv`, `jq env`, awk `ENVIRON`, `ps e`, `make -p`, `cmake -E environment`. They ask,
and nothing resolves them but a human.
"""

from __future__ import annotations

import re

from approvals.permissions.model import RiskInfo
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.programs import PLAIN_VARIABLES

_JQ_ENV = re.compile(r"\$ENV\b|(?<![\w.$])(?:str)?env\b|\$__prog")
_AWK_ENV = re.compile(r"\bENVIRON\b")
_DUMP = "dumps environment variables (may contain secrets)"


def env_dump(inv: Invocation) -> RiskInfo | None:
    """RiskInfo for an invocation that prints environment variables, else None."""
    program, args = inv.program, inv.argv[1:]
    if program == "printenv":
        if args and all(a in PLAIN_VARIABLES for a in args):
            return RiskInfo("low", "prints ordinary variables (PATH, HOME, …)")
        return RiskInfo("high", _DUMP, secret=True)
    if program in ("env", "export", "set", "declare", "typeset", "local", "readonly") and _dumps(inv):
        return RiskInfo("high", _DUMP, secret=True)
    if program in ("jq", "gojq", "jaq", "yq") and any(
        _JQ_ENV.search(a) for a in args if not a.startswith("-")
    ):
        return RiskInfo("high", f"{program} reads the environment ($ENV, env)", secret=True)
    if program in ("awk", "gawk", "mawk", "nawk") and any(_AWK_ENV.search(a) for a in args):
        return RiskInfo("high", "awk reads the environment (ENVIRON)", secret=True)
    if program == "ps" and _ps_environment(args):
        return RiskInfo("high", "ps shows the environment of processes", secret=True)
    if program in ("make", "gmake") and any(_short_has(a, "p") or a == "--print-data-base" for a in args):
        return RiskInfo("high", "make -p prints every variable, the environment included", secret=True)
    return None


def _short_has(arg: str, letter: str) -> bool:
    return arg.startswith("-") and not arg.startswith("--") and arg[1:].isalpha() and letter in arg[1:]


def _ps_environment(args: tuple[str, ...]) -> bool:
    """`ps e`, `ps auxe`, `ps eww`, `ps -E`, `ps -o env`: BSD `e` or a format naming the environment."""
    for i, arg in enumerate(args):
        if (
            not arg.startswith("-")
            and arg.isalpha()
            and "e" in arg
            and (i == 0 or not args[i - 1].startswith("-"))
        ):
            return True
        if arg == "-E" or "environ" in arg or (i > 0 and args[i - 1] in ("-o", "o", "-O", "--format")
                                               and "env" in arg):  # fmt: skip
            return True
    return False


def _dumps(inv: Invocation) -> bool:
    args = [a for a in inv.argv[1:] if a != "--"]
    if inv.program == "env":
        return all(a.startswith("-") or "=" in a for a in args)
    if inv.program in ("declare", "typeset", "local", "readonly"):
        return not any(not a.startswith("-") for a in args) or any(a.startswith("-p") for a in args)
    return not args or args == ["-p"]
