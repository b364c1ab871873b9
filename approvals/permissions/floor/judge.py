"""The floor: destructive commands that nothing overrides (no rule, no policy, no approval).

It judges invocations (programs that really run, after wrappers and `-c` strings), never raw text,
so a commit message or an `echo` that merely mentions `rm -rf /` is not floored.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable, Iterable
from typing import Literal

from approvals.permissions.boundaries import is_raw_device
from approvals.permissions.budget import check_deadline, spend
from approvals.permissions.floor.effects import Effect, effects, storage_wipe
from approvals.permissions.floor.interpreter_code import code_reads
from approvals.permissions.shell.invocation import Invocation, expand, expand_script
from approvals.permissions.shell.script import Script, SimpleCommand
from approvals.permissions.shell.words import UNKNOWN, Word, brace_variants

# Top-level directories whose recursive deletion or chmod breaks the machine (Linux and macOS).
SYSTEM_DIRS = frozenset(
    """
    /bin /boot /dev /etc /home /lib /lib32 /lib64 /libx32 /media /mnt /opt /proc /root /run /sbin
    /srv /sys /tmp /usr /var /snap /nix /Users /System /Library /Applications /Volumes /private
    /cores /usr/bin /usr/sbin /usr/lib /usr/lib64 /usr/local /usr/share /usr/include /usr/libexec
    /var/lib /var/log /var/db /etc/ssl /System/Library /private/etc /private/var
    """.split()  # noqa: SIM905
)
_FS_MAKERS = re.compile(r"^(mkfs(\..+)?|mke2fs|mkswap|wipefs|blkdiscard|mkdosfs|mkntfs|newfs(_.+)?|mkfs_.+)$")
_PARTITIONERS = frozenset({"fdisk", "sfdisk", "cfdisk", "parted", "sgdisk", "gdisk"})
# Interpreter code that forks without end (`perl -e 'fork while fork'`, `while True: os.fork()`).
_FORK_CODE = re.compile(
    r"fork\s*(?:\(\s*\)\s*)?(?:while|until|for|and|\|\|)|"
    r"(?:while|for)(?:\s*\(\s*(?:1|true|;;)\s*\)|\s(?:1|True|true))\s*(?:[:{]\s*)?(?:os\.|process\.|Process\.)?fork|"
    r"\[\s*os\.fork\(\)\s*for|loop\s*\{\s*fork"
)
# A function definition; the lookbehind makes each name start once, so the search stays linear.
_FUNCTION_START = re.compile(r"(?<![^\s;&|(){}])([^\s;&|(){}<>]{1,64})\s*\(\s*\)\s*\{")

Resolve = Callable[[str], str]
_LEXICAL_KEYWORDS = frozenset(["if", "then", "else", "elif", "do", "while", "until", "!", "time", "function"])

# Trees whose every file belongs to the system: destroying or overwriting anything in them is floored.
DEEP_TREES = (
    "/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/sbin", "/usr", "/sys", "/proc",
    "/snap", "/nix", "/root", "/efi", "/System", "/Library", "/Applications", "/private/etc",
    "/var/lib", "/var/db", "/var/log", "/var/spool", "/var/mail", "/var/backups",
)  # fmt: skip
# Trees of the machine's data (services, add-on software): deleting in them is floored; writing a
# file there is an outside write (asked, and an explicit write rule may allow it).
DATA_TREES = ("/opt", "/srv", "/var", "/private/var")
# Scratch places inside those trees (and the per-process views of /proc) that are nobody's system.
_DEEP_EXEMPT = tuple(
    "/var/tmp /var/folders /private/var/folders /private/var/tmp /proc/self/fd /proc/thread-self/fd".split()  # noqa: SIM905, S108
)
# Places whose loss (the directory itself, or everything in it) breaks the machine or a user.
_TOP_DIRS = frozenset(
    "/home /Users /tmp /media /mnt /run /Volumes /cores /private /dev /private/tmp /var/tmp".split()  # noqa: SIM905
)
_GLOB = re.compile(r"[*?\[]")
_MAX_SEGMENTS = 500
PathClass = Literal["root", "top", "deep", "data", "device"]


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def classify_path(path: str, home: str, workspace: str | None = None) -> PathClass | None:
    """What an absolute, normalised path (maybe a glob) is to the floor, or None for ordinary."""
    if UNKNOWN in path:
        return None
    if _GLOB.search(path):
        return _classify_glob(path, home, workspace)
    path = path.rstrip("/") or "/"
    if path == "/":
        return "root"
    if is_raw_device(path):
        return "device"
    if path in _TOP_DIRS or _is_home_like(path, home):
        return "top"
    if path in DEEP_TREES:
        return "deep"
    exempt = (workspace is not None and workspace != "/" and _within(path, workspace)) or _within(path, home)
    scratch = any(_within(path, e) for e in _DEEP_EXEMPT)
    if not exempt and not scratch and any(_within(path, t) for t in DEEP_TREES):
        return "deep"
    if path in SYSTEM_DIRS or path in DATA_TREES:
        return "top"
    if exempt or any(_within(path, e) for e in _DEEP_EXEMPT):
        return None
    return "data" if any(_within(path, t) for t in DATA_TREES) else None


def _is_home_like(path: str, home: str) -> bool:
    """The home directory, an ancestor of it, or another user's home (`/home/bob`, `/Users/x`)."""
    if path == home or home.startswith(path + "/"):
        return True
    parts = path.split("/")
    return len(parts) == 3 and parts[1] in ("home", "Users") and bool(parts[2])


def _classify_glob(pattern: str, home: str, workspace: str | None) -> PathClass | None:
    """A glob is as critical as the worst place it can match (`/u*`, `/*`, `~/.*`, `/usr/lib/py*`)."""
    spend(100, "glob patterns")
    parts = pattern.rstrip("/").split("/")
    first = next(i for i, p in enumerate(parts) if _GLOB.search(p))
    fixed = "/".join(parts[:first]) or "/"
    fixed_class = classify_path(fixed, home, workspace)
    if fixed_class in ("deep", "data"):
        return fixed_class
    names = ["/", home, *_TOP_DIRS, *SYSTEM_DIRS, *DEEP_TREES]
    names += [posixpath.dirname(home)]
    if any(fnmatch.fnmatchcase(n, pattern.rstrip("/")) for n in names):
        hit = [n for n in names if fnmatch.fnmatchcase(n, pattern.rstrip("/"))]
        return "deep" if any(n in DEEP_TREES for n in hit) else "top"
    base = parts[first]
    if first == len(parts) - 1 and not re.search(r"[A-Za-z0-9]", base) and fixed_class is not None:
        return "top"  # `~/*`, `/tmp/.*`: everything in a top directory
    if fixed_class == "root" and first == 1:
        return "top"  # `/[a-z]*`-like names directly under the root
    return None


def is_critical(path: str, home: str, workspace: str | None = None) -> bool:
    """Whether deleting `path` recursively is floored (`/`, a system directory at any depth, home)."""
    return classify_path(path, home, workspace) is not None


# Which path classes are floored for each kind of effect (see effects.py, beside this module).
_FLOORED: dict[tuple[str, bool], frozenset[str]] = {
    ("destroy", True): frozenset({"root", "top", "deep", "data", "device"}),
    ("destroy", False): frozenset({"deep", "data", "device"}),
    ("overwrite", False): frozenset({"deep", "device"}),
    ("append", False): frozenset({"deep", "device"}),
    ("into", False): frozenset({"root", "deep", "device"}),
    ("mode", True): frozenset({"root", "top", "deep", "device"}),
    ("mode", False): frozenset({"root", "deep", "device"}),
}
_VERB_WORDS = {
    "destroy": "deletes", "overwrite": "overwrites", "append": "writes into", "into": "writes into",
    "mode": "changes the permissions or owner of",
}  # fmt: skip
_CLASS_WORDS = {"root": "the root directory", "top": "the home or a top-level directory",
                "deep": "a system directory", "data": "a system data directory",
                "device": "a block device"}  # fmt: skip


def _through_links(effect: Effect, links: tuple[tuple[str, str], ...]) -> list[str]:
    """The effect's texts, and each again through a symlink the same command created (`l/` → `/`)."""
    texts = [effect.target, *effect.alternatives]
    spend(len(texts) * (len(links) + 1), "paths through symlinks")
    for text in list(texts):
        for link, target in links:
            if text == link or text.startswith(link + "/"):
                texts.append(target + text[len(link) :])
    return texts


def effect_floor(
    effect: Effect,
    resolve: Resolve,
    home: str,
    workspace: str | None,
    links: tuple[tuple[str, str], ...] = (),
) -> str | None:
    """The floor reason for one effect, or None."""
    recursive = effect.recursive and effect.verb in ("destroy", "mode")
    floored = _FLOORED[(effect.verb, recursive)]
    for text in _through_links(effect, links):
        for variant in brace_variants(text):
            if not variant or UNKNOWN in variant:
                continue
            klass = classify_path(resolve(variant), home, workspace)
            if klass is not None and klass in floored:
                where = _CLASS_WORDS[klass]
                return f"{_VERB_WORDS[effect.verb]} {where}, {resolve(variant)} ({effect.why})"
    return None


def invocation_floor(
    inv: Invocation, resolve: Resolve, home: str, workspace: str | None = None
) -> str | None:
    """The floor reason for one invocation, or None."""
    program = inv.program
    for effect in effects(inv):
        reason = effect_floor(effect, resolve, home, workspace, inv.links)
        if reason is not None:
            return reason
    if (
        program in ("rm", "shred", "unlink")
        and inv.extra_args
        and _upstream_critical(inv.command, resolve, home)
    ):
        return "deletion of paths listed from the root, home or a system directory"
    if inv.inline_code and _FORK_CODE.search(inv.inline_code):
        return "fork bomb"
    if inv.inline_code:
        reason = code_floor(inv.inline_code, resolve, home, workspace, inv.depth)
        if reason is not None:
            return reason
    if program == "cryptsetup" and any(a in ("luksFormat", "erase", "luksErase") for a in inv.argv[1:]):
        return "wipes an encrypted volume"
    if _FS_MAKERS.match(program):
        return "creates or wipes a filesystem"
    if program in _PARTITIONERS and not any(
        w.text in ("-l", "--list", "print", "-p", "--print") for w in inv.words[1:]
    ):
        return "rewrites a partition table"
    return storage_wipe(inv)


def code_floor(code: str, resolve: Resolve, home: str, workspace: str | None, depth: int = 0) -> str | None:
    """The floor reason for literal interpreter code (read by interpreter_code.py), or None."""
    read = code_reads(code) if depth <= 4 else None
    if read is None:
        return None
    deleted, run_texts = read
    for target in deleted:
        klass = classify_path(resolve(target), home, workspace)
        if klass is not None:
            return f"interpreter code deletes {resolve(target)}"
    for text in run_texts:
        for inv in expand(text, min(depth + 1, 6)).invocations:
            reason = invocation_floor(inv, resolve, home, workspace)
            if reason is not None:
                return f"interpreter code runs a command that {reason}"
    return None


def _lexical_fork_bomb(text: str) -> bool:
    """`name(){ name | name & }` in text the grammar could not parse."""
    for match in _FUNCTION_START.finditer(text):
        name = re.escape(match.group(1))
        end = text.find("}", match.end(), match.end() + 256)
        body = text[match.end() : end if end >= 0 else match.end() + 256]
        if re.search(name + r"\s*\|\s*" + name + r"\s*&", body[:256]):
            return True
    return False


def _operand_paths(words: Iterable[Word], resolve: Resolve) -> list[str]:
    paths: list[str] = []
    for word in words:
        if word.text.startswith("-") and word.text != "-":
            continue
        for candidate in word.candidates():
            for variant in brace_variants(candidate):
                if variant and UNKNOWN not in variant:
                    paths.append(resolve(variant))
    return paths


def _upstream_critical(command: SimpleCommand, resolve: Resolve, home: str) -> bool:
    if command.stdin in ("heredoc", "herestring") and command.heredoc is not None:
        # `xargs rm -rf <<< /`: the listed paths are right there.
        texts = command.heredoc.split()
        return any(is_critical(p, home) for p in _operand_paths([Word(text=t) for t in texts], resolve))
    upstream = command.upstream
    if not upstream or posixpath.basename(upstream[0]) not in ("find", "ls", "echo", "printf"):
        return False
    paths = _operand_paths([Word(text=t) for t in upstream[1:]], resolve)
    return any(is_critical(p, home) for p in paths)


def script_floor(
    script: Script, invocations: Iterable[Invocation], resolve: Resolve, home: str
) -> str | None:
    """Floor reason for parsed shell text, or None."""
    if script.fork_bomb:
        return "fork bomb"
    for inv in invocations:
        reason = invocation_floor(inv, resolve, home)
        if reason is not None:
            return reason
    return None


def lexical_floor(text: str, resolve: Resolve, home: str, *, unquoted: bool = False) -> str | None:
    """Second opinion for text the grammar could not parse cleanly: split on operators, no grammar.

    With `unquoted`, quotes are also ignored: when the grammar failed, a quote may end somewhere else
    than the parser thinks (a here-document inside `bash -c '…'` inside a here-document).
    """
    if _lexical_fork_bomb(text):
        return "fork bomb"
    segments = _segments(text)
    if unquoted and ("'" in text or '"' in text):
        # Newlines separate segments in `_segments` already: one pass over the unquoted text.
        segments += _segments(text.replace('"', " ").replace("'", " "))
    if len(segments) > _MAX_SEGMENTS:
        return f"too complex to judge: more than {_MAX_SEGMENTS} commands in text that does not parse"
    for segment in segments:
        check_deadline()
        if segment and segment[0] == ">":
            if is_raw_device(resolve(_lexical_expand(segment[1] if len(segment) > 1 else ""))):
                return "raw write to a block device"
            segment = segment[2:]
        while segment and segment[0] in _LEXICAL_KEYWORDS:
            segment = segment[1:]
        words = tuple(Word(text=_lexical_expand(t)) for t in segment)
        if not words:
            continue
        script = Script(commands=(SimpleCommand(words),), problems=())
        reason = script_floor(script, expand_script(script), resolve, home)
        if reason is not None:
            return reason
    return None


def _lexical_expand(token: str) -> str:
    """`$HOME`/`${HOME}` at the start is home; any other `$VAR` is unknown (possibly empty)."""
    token = re.sub(r"^\$(\{HOME\}|HOME\b)", "~", token)
    return re.sub(r"\$(\{[^}]{0,256}\}|\w+)", UNKNOWN, token)


# A shell-ish token: a quoted string, a run of operators, or a run of other characters.
_TOKEN = re.compile(r"""'[^']*'?|"(?:[^"\\]|\\.)*"?|[;&|(){}<>\n]+|[^\s;&|(){}<>'"]+""")
_OPERATORS = frozenset(";&|(){}<>\n")


def _tokens(text: str) -> list[str]:
    """Words and operators, quotes removed, adjacent pieces joined (`r'm'` is rm); linear."""
    tokens: list[str] = []
    end = -1
    for match in _TOKEN.finditer(text):
        piece = match.group()
        operator = piece[0] in _OPERATORS
        if piece[0] in "'\"":
            piece = piece[1:-1] if len(piece) > 1 and piece[-1] == piece[0] else piece[1:]
        if not operator and match.start() == end and tokens and not (set(tokens[-1]) <= _OPERATORS):
            tokens[-1] += piece
        else:
            tokens.append(piece)
        end = match.end()
    return tokens


def _segments(text: str) -> list[list[str]]:
    cleaned = re.sub(r"[`]|\$\(|<\(|>\(", " ; ", text)
    # `${IFS}` splits words; `{rm,-rf,/}` in command position expands to words.
    cleaned = re.sub(r"\$\{IFS\}|\$IFS\b", " ", cleaned)
    cleaned = re.sub(
        r"(?:^|(?<=[\s;&|(]))\{([^{}\s,]*(?:,[^{}\s,]*)+)\}", lambda m: m.group(1).replace(",", " "), cleaned
    )
    tokens = _tokens(cleaned)
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) <= set(";&|(){}<>\n"):
            # Keep a marker so the word after `>` is read as a redirect target.
            segments.append([">"] if ">" in token else [])
        elif token:
            segments[-1].append(token)
    return segments
