"""Option values that send data out or name a place outside the workspace, for any program.

A tool's options can never be closed completely (`pytest --pastebin`, `--registry URL`,
`--cov-report=html:/tmp/x`, `--logger "trx;LogFilePath=/etc/x"`), so whatever the program: an
option whose value is a URL asks (egress, or code fetched from elsewhere), a known egress option
asks, and a path inside a compound value (`KIND:PATH`, `A=B;C=PATH`) is judged like any other write.
Text utilities (grep patterns, sed scripts, echo) and network programs (judged on their own) are
left out: their URLs are data or their whole point.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from approvals.permissions.shell.interpreters import interpreter_family
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.words import UNKNOWN

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]{0,15}://\S")
_SPLIT = re.compile(r"[;,=]|(?<=[A-Za-z0-9_]):(?=[/~.])")
# Options that upload results or talk to a service whatever their value.
_EGRESS_OPTIONS = frozenset(
    """--pastebin --sentry-dsn --dsn --webhook --upload --upload-url --report-url --publish --push
    --slack-webhook --coveralls""".split()  # noqa: SIM905
)
# Programs whose words are data (patterns, scripts, text) or that are network programs judged elsewhere.
_DATA = frozenset(
    """echo printf grep egrep fgrep rg ag ack sed awk gawk mawk jq yq xq tr cut sort uniq wc head tail cat
    tee git gh glab curl wget http xh httpie ssh scp sftp rsync docker podman kubectl helm open xdg-open
    links lynx w3m aria2c nc ncat socat telnet ftp lftp mail sendmail test [ [[ export declare local
    set printenv env true false :""".split()  # noqa: SIM905
)


@dataclass(frozen=True, slots=True)
class Value:
    """A URL, an egress option (text is the option), or a path inside an option's value."""

    kind: Literal["url", "egress", "path"]
    text: str


def option_values(inv: Invocation) -> Iterator[tuple[str, Value]]:
    """(option, value) pairs worth judging: URLs, egress options, outside paths in compound values."""
    module = interpreter_family(inv.program) == "python" and "-m" in inv.argv
    if inv.program in _DATA or inv.inline_code is not None:
        return
    if interpreter_family(inv.program) is not None and not module:
        return
    args = inv.argv[1:]
    for i, arg in enumerate(args):
        if not arg.startswith("-") or UNKNOWN in arg:
            continue
        option, eq, value = arg.partition("=")
        if option in _EGRESS_OPTIONS:
            yield option, Value("egress", option)
            continue
        separate = args[i + 1] if not eq and i + 1 < len(args) else ""
        if _URL.match(separate):
            yield arg, Value("url", separate)
        elif ";" in separate or "=" in separate:
            yield from _pieces(arg, separate)
        if eq and _URL.match(value):
            yield option, Value("url", value)
        elif eq:
            yield from _pieces(option, value)


def _pieces(option: str, value: str) -> Iterator[tuple[str, Value]]:
    """URLs and paths inside a compound value (`html:/tmp/x`, `trx;LogFilePath=/etc/x`)."""
    if ":" in value or ";" in value or "=" in value:
        for piece in _SPLIT.split(value)[1:]:
            text = piece.strip("\"' ")
            if _URL.match(text):
                yield option, Value("url", text)
            elif text.startswith(("/", "~", "..")):
                yield option, Value("path", text)


# `RUNNER VERB PROGRAM`: forms whose next word chooses the program that really runs.
_CHOOSING_VERBS = {
    "uv": ("run", "tool"), "uvx": (), "poetry": ("run",), "pdm": ("run",), "hatch": ("run",),
    "bundle": ("exec",), "pnpm": ("exec", "dlx", "run", "run-script"), "yarn": ("exec", "dlx", "run"),
    "npm": ("exec", "x", "run", "run-script"), "bun": ("x", "run"), "pipx": ("run",), "npx": (),
    "pnpx": (), "bunx": (), "composer": ("run", "run-script", "exec"), "rye": ("run",), "conda": ("run",),
}  # fmt: skip


def chosen_program(inv: Invocation) -> str | None:
    """The program a runner's word chooses (`python -m X`, `npx X`, `uv run X`, `cargo +tc X`), or None."""
    args = [a for a in inv.argv[1:] if a != "--"]
    if interpreter_family(inv.program) == "python" and "-m" in args[:-1]:
        return args[args.index("-m") + 1]
    if inv.program == "cargo" and args and args[0].startswith("+"):
        return next((a for a in args[1:] if not a.startswith("-")), "")
    verbs = _CHOOSING_VERBS.get(inv.program)
    if verbs is None:
        return None
    operands = [a for a in args if not a.startswith("-")]
    if not verbs:
        return operands[0] if operands else ""
    if operands and operands[0] in verbs:
        return operands[1] if len(operands) > 1 else ""
    return None


def wildcard_covers(pattern: str, inv: Invocation, risk: str, side_effect: bool) -> bool:
    """Whether a wildcard allow rule may approve this invocation (principles 1 and 8).

    `command(python *)` covers `python app.py` but not `python -m twine upload`: a program chosen
    by a runner's word, when it is not low risk, is covered only by a rule that names it. A
    publish, push or upload (a side effect beyond the workspace) is covered only by a rule whose
    literal words name more than the program (`command(git push *)`, not `command(git *)`).
    """
    literal: list[str] = []
    for word in pattern.split():
        if "*" in word or "?" in word:
            break
        literal.append(word)
    chosen = chosen_program(inv)
    if chosen is not None and risk != "low" and chosen not in literal:
        return False
    return not (side_effect and len(literal) < 2)
