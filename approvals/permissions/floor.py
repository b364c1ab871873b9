"""The floor: destructive commands that nothing overrides (no rule, no policy, no approval).

It judges invocations (programs that really run, after wrappers and `-c` strings), never raw text,
so a commit message or an `echo` that merely mentions `rm -rf /` is not floored.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable

from approvals.permissions.paths import is_raw_device
from approvals.permissions.shell.invocation import Invocation, expand_script
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
_DESTRUCTIVE_EXEC = frozenset({"rm", "shred", "unlink", "rmdir", "mv", "chmod", "chown", "truncate", "dd"})
# Interpreter code that forks without end (`perl -e 'fork while fork'`, `while True: os.fork()`).
_FORK_CODE = re.compile(
    r"fork\s*(?:\(\s*\))?\s*(?:while|until|for|and|\|\|)|"
    r"(?:while|for)\s*(?:\(\s*(?:1|true|;;)\s*\)|\s+(?:1|True|true))\s*[:{]?\s*(?:os\.|process\.|Process\.)?fork|"
    r"\[\s*os\.fork\(\)\s*for|loop\s*\{\s*fork"
)
_FORK_BOMB = re.compile(r"(\S+)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&")

Resolve = Callable[[str], str]
_LEXICAL_KEYWORDS = frozenset(["if", "then", "else", "elif", "do", "while", "until", "!", "time", "function"])


def is_critical(path: str, home: str) -> bool:
    """`/`, a system directory, the home directory or an ancestor of it, or a broad glob over one."""
    if UNKNOWN in path:
        return False
    if any(ch in path for ch in "*?["):
        parent = posixpath.dirname(path.rstrip("/")) or "/"
        base = posixpath.basename(path.rstrip("/"))
        if not re.search(r"[A-Za-z0-9]", base) and (parent == "/" or _critical_exact(parent, home)):
            return True
        return any(fnmatch.fnmatchcase(d, path.rstrip("/")) for d in (*SYSTEM_DIRS, home))
    return _critical_exact(path, home)


def _critical_exact(path: str, home: str) -> bool:
    path = path.rstrip("/") or "/"
    if path == "/" or path in SYSTEM_DIRS:
        return True
    return home == path or home.startswith(path + "/") or bool(re.fullmatch(r"/(home|Users)/[^/]+", path))


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


def _operands(inv: Invocation) -> list[Word]:
    words = list(inv.words[1:])
    if "--" in [w.text for w in words]:
        index = [w.text for w in words].index("--")
        return [w for w in words[:index] if not w.text.startswith("-")] + words[index + 1 :]
    return [w for w in words if not w.text.startswith("-") or w.text == "-"]


def _recursive(inv: Invocation) -> bool:
    for word in inv.words[1:]:
        text = word.text
        if text == "--":
            break
        if text in ("--recursive", "--no-preserve-root") or (
            text.startswith("-") and not text.startswith("--") and ("r" in text or "R" in text)
        ):
            return True
    return False


def invocation_floor(inv: Invocation, resolve: Resolve, home: str) -> str | None:
    """The floor reason for one invocation, or None."""
    program = inv.program
    if program == "rm" and _recursive(inv):
        if any(is_critical(p, home) for p in _operand_paths(_operands(inv), resolve)):
            return "recursive deletion of the root, home or a system directory"
        if inv.extra_args and _upstream_critical(inv.command, resolve, home):
            return "recursive deletion of paths listed from a system directory"
    if program == "mv" and any(is_critical(p, home) for p in _operand_paths(_operands(inv)[:-1], resolve)):
        return "moves the root, home or a system directory away"
    if program in ("chmod", "chown", "chgrp", "setfacl") and _recursive(inv):
        operands = _operands(inv)[1:]
        if any(is_critical(p, home) for p in _operand_paths(operands, resolve)):
            return f"recursive {program} of the root, home or a system directory"
    if inv.inline_code and _FORK_CODE.search(inv.inline_code):
        return "fork bomb"
    if program == "cryptsetup" and any(a in ("luksFormat", "erase", "luksErase") for a in inv.argv[1:]):
        return "wipes an encrypted volume"
    if _FS_MAKERS.match(program):
        return "creates or wipes a filesystem"
    if program in _PARTITIONERS and not any(w.text in ("-l", "--list", "print") for w in inv.words[1:]):
        return "rewrites a partition table"
    if program == "shred" and any(p.startswith("/dev/") for p in _operand_paths(_operands(inv), resolve)):
        return "shreds a device"
    if program == "find":
        return _find_floor(inv, resolve, home)
    return _device_floor(inv, resolve)


def _device_floor(inv: Invocation, resolve: Resolve) -> str | None:
    """Raw writes to a block device: `dd of=`, `tee`/`cp` onto it, or a redirect into it."""
    targets = [r.target.text for r in inv.command.redirects if r.writes and r.target is not None]
    if inv.program == "dd":
        targets += [a[3:] for a in inv.argv[1:] if a.startswith("of=")]
    elif inv.program == "tee":
        targets += [w.text for w in _operands(inv)]
    elif inv.program in ("cp", "install", "mv", "ln") and len(_operands(inv)) > 1:
        targets.append(_operands(inv)[-1].text)
    if any(UNKNOWN not in t and is_raw_device(resolve(t)) for t in targets):
        return "raw write to a block device"
    return None


def _find_floor(inv: Invocation, resolve: Resolve, home: str) -> str | None:
    texts = [w.text for w in inv.words]
    roots: list[Word] = []
    for word in inv.words[1:]:
        if word.text.startswith(("-", "(", "!")):
            break
        roots.append(word)
    destructive = "-delete" in texts or any(
        texts[i] in ("-exec", "-execdir", "-ok", "-okdir")
        and i + 1 < len(texts)
        and posixpath.basename(texts[i + 1]) in _DESTRUCTIVE_EXEC
        for i in range(len(texts))
    )
    if destructive and any(is_critical(p, home) for p in _operand_paths(roots, resolve)):
        return "find over the root, home or a system directory that deletes or changes what it finds"
    return None


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
    if _FORK_BOMB.search(text):
        return "fork bomb"
    segments = _segments(text)
    if unquoted:
        for line in text.replace('"', " ").replace("'", " ").splitlines():
            segments += _segments(line)
    for segment in segments:
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
    return re.sub(r"\$(\{[^}]*\}|\w+)", UNKNOWN, token)


def _segments(text: str) -> list[list[str]]:
    cleaned = re.sub(r"[`]|\$\(|<\(|>\(", " ; ", text)
    # `${IFS}` splits words; `{rm,-rf,/}` in command position expands to words.
    cleaned = re.sub(r"\$\{IFS\}|\$IFS\b", " ", cleaned)
    cleaned = re.sub(
        r"(?:^|(?<=[\s;&|(]))\{([^{}\s]+(?:,[^{}\s]*)+)\}", lambda m: m.group(1).replace(",", " "), cleaned
    )
    try:
        lexer = shlex.shlex(cleaned, posix=True, punctuation_chars=";&|(){}<>\n")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = re.split(
            r"\s+", re.sub(r"([;&|(){}<>\n])", r" \1 ", cleaned.replace('"', " ").replace("'", " "))
        )
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) <= set(";&|(){}<>\n"):
            # Keep a marker so the word after `>` is read as a redirect target.
            segments.append([">"] if ">" in token else [])
        elif token:
            segments[-1].append(token)
    return segments
