"""Commands whose output is only names of workspace files: `$(git ls-files)`, `$(find . -name '*.py')`.

A substitution like that, in argument position, may feed a read-only program (`wc -l $(git ls-files)`)
without an ask: the names come from relative roots, the producer runs nothing, and a name filter keeps
secret files (`.env`, keys) out. Anything else stays "computed at run time".
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

# Plain names the filters must not be able to produce (a sample of paths.py's secret names).
_SECRET_EXAMPLES = (
    ".env", ".env.local", "prod.env", ".envrc", "server.pem", "server.key", "id_rsa", "id_ed25519",
    "cert.p12", "cert.pfx", ".netrc", ".npmrc", ".pypirc", "credentials", "credentials.json",
    "secrets.yaml", "secrets.yml", "secrets.json", "prod.tfvars", ".git-credentials", "a.jks",
)  # fmt: skip
_FIND_VALUED = frozenset(
    """-name -iname -path -ipath -wholename -iwholename -regex -iregex -type -maxdepth -mindepth
    -mtime -mmin -newer -size""".split()  # noqa: SIM905
)
_FIND_FLAGS = frozenset("""-empty -prune -print -print0 -not ! ( ) -o -a -or -and""".split())  # noqa: SIM905
_FIND_FILTERS = frozenset({"-name", "-iname"})
# Tests that may be negated: excluding a path or a type never widens the name filter.
_FIND_NARROWING = frozenset({"-path", "-ipath", "-wholename", "-iwholename", "-type"})
# Tracked files only: `--others` also lists untracked (even ignored) files such as `.env`.
_GIT_LS_OPTIONS = frozenset({"--cached", "-c", "--"})
_GIT_DIFF_OPTIONS = frozenset({"--name-only", "--cached", "--staged", "--relative", "--"})
# No -a/-A: they list hidden files such as `.env`.
_LS_OPTION = re.compile(r"^-[1drtS]+$")
# No -r: a recursive search can name hidden files such as `.env`.
_GREP_OPTION = re.compile(r"^-[lLiIwEFsvxH]+$")


_REVISION_COMMANDS: dict[str, frozenset[str]] = {
    "rev-parse": frozenset({"--short", "--verify", "-q", "--quiet", "--abbrev-ref", "--symbolic-full-name"}),
    "merge-base": frozenset({"--fork-point"}),
    "describe": frozenset({"--tags", "--always", "--abbrev=0", "--exact-match"}),
    "rev-list": frozenset({"-1", "-n1", "--max-count=1"}),
}


def prints_revision(stages: Sequence[Sequence[str]]) -> bool:
    """`git rev-parse HEAD~1`, `git merge-base main HEAD`: a commit name, never a file path."""
    if len(stages) != 1 or len(stages[0]) < 3 or stages[0][0] != "git":
        return False
    sub, args = stages[0][1], stages[0][2:]
    options = _REVISION_COMMANDS.get(sub)
    if options is None:
        return False
    # Only revision operands (`HEAD~1`, `main`, `origin/main`); `--show-toplevel` and friends print paths.
    return all(a in options or (not a.startswith("-") and _revision(a)) for a in args)


def lists_workspace_paths_piped(stages: Sequence[Sequence[str]]) -> bool:
    """A listing, optionally narrowed by line filters that read only the pipe (`ls -t | head -1`)."""
    return bool(stages) and lists_workspace_paths(stages[0]) and all(_filter(s) for s in stages[1:])


def _filter(argv: Sequence[str]) -> bool:
    """head/tail/sort/uniq/grep that only select or reorder stdin lines (no file operands)."""
    if not argv:
        return False
    program, args = argv[0], list(argv[1:])
    if program in ("head", "tail"):
        return all(a.startswith("-") or a.isdigit() for a in args) and "-f" not in args
    if program in ("sort", "uniq"):
        return all(a.startswith("-") and not a.startswith(("-o", "--output", "--files0")) for a in args)
    if program == "grep":
        operands = [a for a in args if not a.startswith("-")]
        options = [a for a in args if a.startswith("-")]
        return len(operands) == 1 and all(_GREP_OPTION.match(a) for a in options)
    return False


def lists_workspace_paths(argv: Sequence[str]) -> bool:
    """True when `argv` only prints names of files under relative roots, none of them a secret."""
    if not argv:
        return False
    program, args = argv[0], list(argv[1:])
    if program == "git" and args[:1] == ["ls-files"]:
        return all(a in _GIT_LS_OPTIONS or _relative(a) for a in args[1:]) and no_secret_globs(args[1:])
    if program == "git" and args[:1] == ["diff"] and "--name-only" in args:
        return all(a in _GIT_DIFF_OPTIONS or a.startswith("--diff-filter=") or _revision(a) for a in args[1:])
    if program == "find":
        return _find(args)
    if program == "ls":
        operands = [a for a in args if not _LS_OPTION.match(a)]
        return all(_relative(a) and not a.startswith("-") for a in operands) and no_secret_globs(operands)
    if program in ("grep", "egrep", "fgrep"):
        return _grep(args)
    return False


def _relative(text: str) -> bool:
    """A path that stays below the working directory (no `/`, `~`, `..`, pathspec magic or braces)."""
    if not text or text.startswith(("/", "~", "-", ":")) or "{" in text:
        return False
    return ".." not in text.split("/")


def _revision(text: str) -> bool:
    return (
        not text.startswith("-")
        and re.fullmatch(r"[A-Za-z0-9_.~^@/\-]+", text) is not None
        and (".." not in text.split("/"))
    )


def no_secret_globs(patterns: Sequence[str]) -> bool:
    """No pattern can name a secret file (a hidden file, a key, an env file)."""
    for pattern in patterns:
        base = pattern.rsplit("/", 1)[-1].lower()
        if base.startswith(".") or any(fnmatch.fnmatchcase(name, base) for name in _SECRET_EXAMPLES):
            return False
    return True


def _find(args: list[str]) -> bool:
    """`find ROOTS [tests]`: relative roots, only name/type/time tests, a name filter that is not a secret.

    `-not -path '*/node_modules/*'` only narrows further; negating a name test or `-o` would
    defeat the filter, so those are not a listing.
    """
    i = 0
    while i < len(args) and not args[i].startswith(("-", "(", "!")):
        if not _relative(args[i]) and args[i] != ".":
            return False
        i += 1
    names: list[str] = []
    negated = False
    while i < len(args):
        arg = args[i]
        if arg in ("!", "-not"):
            negated = True
            i += 1
            continue
        if negated and arg not in _FIND_NARROWING:
            return False  # `! -name '*.py'`, `! ( … )`: everything else, `.env` included
        if arg in _FIND_VALUED and i + 1 < len(args):
            if arg in _FIND_FILTERS:
                names.append(args[i + 1])
            i += 2
        elif arg in _FIND_FLAGS and arg not in ("-o", "-or"):
            i += 1
        else:
            return False  # -exec, -delete, -printf, -L, -o…: not a plain filtered listing
        negated = False
    return bool(names) and no_secret_globs(names)


def _grep(args: list[str]) -> bool:
    """`grep -l[r] PATTERN [ROOTS]`: file names only, from relative roots."""
    options = [a for a in args if a.startswith("-")]
    if not options or not all(_GREP_OPTION.match(a) for a in options):
        return False
    if not any("l" in a or "L" in a for a in options):
        return False
    files = [a for a in args if not a.startswith("-")][1:]
    return bool(files) and all(_relative(a) for a in files) and no_secret_globs(files)
