"""Secrets by content: a reader is judged by what it can read, not by the names it was given.

`find . -exec cat {} +`, `find . | xargs cat`, `xargs -a list cat`, `git ls-files -o | xargs cat`:
the reader prints every file a listing names, `.env` included, unless the listing is one
`listings.py` knows to name only workspace files that cannot be secrets (`find . -name '*.py'`).
A recursive search that prints matching lines over a tree (`grep -r . .`, `rg --hidden KEY`) reads
`.env` too when its pattern is broad or names a credential; a narrow pattern (`grep -rn TODO src`)
only shows lines a secret would not have, and stays allowed (decision documented in the README).
"""

from __future__ import annotations

import re

from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.listings import lists_workspace_paths, no_secret_globs
from approvals.permissions.shell.words import UNKNOWN

# Programs that print, copy or send the contents of the files they are given.
CONTENT_READERS = frozenset(
    """
    cat tac nl head tail less more most grep egrep fgrep rg ag ack strings xxd od hexdump base64
    base32 sort uniq cut paste awk gawk mawk sed tee cp mv tar zip 7z rsync scp curl wget jq yq bat
    iconv column fold fmt pr expand diff sdiff cmp openssl gpg nc python python3 node perl ruby
    """.split()  # noqa: SIM905
)
_NAMES_ONLY = frozenset(
    {"-l", "-L", "-c", "-q", "--files-with-matches", "--files-without-match", "--count", "--quiet", "--files"}
)
# Patterns that match nearly every line, or name what credentials are called.
_SECRET_WORDS = re.compile(
    r"(?i)api[_-]?key|secret|token|passw|pwd|credential|private|bearer|aws_|gh[pousr]_|sk-|begin |cookie"
)
_HIDDEN_FLAGS = frozenset({"--hidden", "-.", "-uu", "-uuu", "--unrestricted", "-u"})


def names_only(inv: Invocation) -> bool:
    """`grep -l`, `rg -c`: the reader prints names or counts, never lines."""
    return any(a in _NAMES_ONLY or (_short(a) and any(c in a[1:] for c in "lLcq")) for a in inv.argv[1:])


def _short(arg: str) -> bool:
    return arg.startswith("-") and not arg.startswith("--") and arg[1:].isalpha()


def computed_names(inv: Invocation) -> str | None:
    """`cat $(ls -a)`, `cat $(find .)`: a reader handed names printed at run time (not a known listing)."""
    if inv.program not in CONTENT_READERS or names_only(inv):
        return None
    for word in inv.words[1:]:
        computed = word.substitution or UNKNOWN in word.text
        if computed and not word.listing and not word.revision and not word.process_substitution:
            return f"{inv.program} reads files named at run time"
    return None


def listing_reader(inv: Invocation, find_argv: tuple[str, ...] | None) -> str | None:
    """Why a reader fed by find/xargs may print secrets, or None."""
    if not inv.extra_args or inv.program not in CONTENT_READERS or names_only(inv):
        return None
    if inv.wrappers[:1] == ("find",):
        source = _until_action(find_argv or ())
        return None if lists_workspace_paths(source) else f"find runs {inv.program} on every file it finds"
    if "xargs" in inv.wrappers:
        words = [w.text for w in inv.command.words]
        if any(w in ("-a", "--arg-file") or w.startswith("--arg-file=") for w in words):
            return f"xargs -a: {inv.program} reads files named in a file"
        if inv.command.stdin in ("file",):
            return f"{inv.program} reads files named in a file"
        upstream = inv.command.upstream
        if upstream and not lists_workspace_paths(upstream):
            return f"{inv.program} reads every file {upstream[0]} lists"
    return None


def broad_search(inv: Invocation) -> str | None:
    """A recursive search printing lines, over hidden files, with a broad or credential pattern."""
    args = inv.argv[1:]
    if inv.program in ("grep", "egrep", "fgrep"):
        recursive = "--recursive" in args or any(
            a.startswith("-") and not a.startswith("--") and ("r" in a or "R" in a) for a in args
        )
        includes = [a.split("=", 1)[1] for a in args if a.startswith("--include=")]
        if not recursive or (includes and no_secret_globs(includes)):
            return None
        if includes:
            return f"{inv.program} searches files named like secrets ({', '.join(includes)})"
    elif inv.program in ("rg", "ag"):
        if not any(a in _HIDDEN_FLAGS for a in args):
            return None  # hidden files (`.env`) are skipped unless asked for
    else:
        return None
    if names_only(inv):
        return None
    pattern = _pattern(args)
    if pattern is None or len(re.sub(r"[^A-Za-z0-9]", "", pattern)) < 3 or _SECRET_WORDS.search(pattern):
        return f"{inv.program} prints lines of every file below, .env included (pattern {pattern!r})"
    return None


def _pattern(args: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(args):
        if arg in ("-e", "--regexp") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--regexp="):
            return arg.split("=", 1)[1]
    operands = [a for a in args if not a.startswith("-")]
    return operands[0] if operands else None


def _until_action(argv: tuple[str, ...]) -> list[str]:
    """`find . -name '*.py' -exec cat {} +` → the listing part, `find . -name '*.py'`."""
    out: list[str] = []
    for arg in argv:
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            break
        out.append(arg)
    return out
