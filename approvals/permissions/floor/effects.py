"""What one program run destroys or overwrites, and where: the effects the floor judges.

The floor does not ask "is this `rm`?" but "does this run delete, truncate, overwrite, move away,
re-permission or write into a place whose loss breaks the machine?". Each program family says
which of its words name such a place (`rm` operands, `git -C DIR clean`, `cargo --target-dir`,
`pytest --basetemp`, `rsync --delete … DEST`, `tar --remove-files`, a `>` redirect, an
environment value such as `SOMETOOL_TARGET_DIR=/usr` for a `clean`); `judge.py` resolves the
places like bash would and decides.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

from approvals.permissions.shell.interpreters import interpreter_family
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.words import UNKNOWN, Word

# destroy: deleted (with everything below it when recursive); overwrite/append: the file's bytes;
# into: files are written (or overwritten) inside the directory; mode: permissions or owner change.
Verb = Literal["destroy", "overwrite", "append", "into", "mode"]


@dataclass(frozen=True, slots=True)
class Effect:
    """One place a program run changes, as written (relative, `~` and UNKNOWN unresolved)."""

    verb: Verb
    target: str
    why: str
    recursive: bool = False
    # Other texts the target word may expand to (`${X:-/}`, an empty variable).
    alternatives: tuple[str, ...] = ()


# Words that make a build tool delete its output (or an install) rather than write it.
CLEAN_VERBS = frozenset(
    """clean distclean mrproper realclean maintainer-clean clobber uninstall purge prune nuke wipe
    destroy remove rm delete reset""".split()  # noqa: SIM905
)
# Options whose directory the tool deletes and recreates on every run.
_WIPE_OPTIONS = frozenset({"--basetemp", "--site-dir"})
# Options naming the directory a tool writes into (and deletes, with a clean verb).
_INTO_OPTIONS = frozenset(
    """--target-dir --prefix --destdir --root --out-dir --outdir --outDir --output-dir --build-dir
    --dist-dir --install-dir --target-directory --work-tree --git-dir --cache-dir --installroot
    --install-root --install-base --home --exec-prefix --libdir --bindir --sysconfdir""".split()  # noqa: SIM905
)
# Options naming a file a program writes its output to (`git diff --output=`, `gcc -o`, `curl -o`).
_OUTPUT_OPTIONS = frozenset({"--output", "-o", "--output-file", "--out-file", "--log-file", "--outfile"})
_STORAGE: dict[str, frozenset[str]] = {
    "zpool": frozenset({"destroy", "labelclear"}),
    "zfs": frozenset({"destroy"}),
    "lvremove": frozenset({"*"}),
    "vgremove": frozenset({"*"}),
    "pvremove": frozenset({"*"}),
    "blkdiscard": frozenset({"*"}),
    "sg_format": frozenset({"*"}),
    "mdadm": frozenset({"--zero-superblock"}),
    "dmsetup": frozenset({"remove", "remove_all", "wipe_table"}),
    "nvme": frozenset({"format", "sanitize"}),
    "hdparm": frozenset({"--security-erase", "--security-erase-enhanced", "--trim-sector-ranges"}),
}
_DIR_SUFFIXES = ("DIR", "ROOT", "HOME", "PREFIX", "TARGET", "TREE", "DEST", "BASETEMP", "CACHE",
                 "TMP", "TEMP", "OUT", "OUTPUT", "LOCATION", "FOLDER", "SITE", "WORKSPACE")  # fmt: skip
# Variable names saying where a tool writes (not where it reads a toolchain from, like JAVA_HOME).
_OUTPUT_MARKS = ("TARGET", "OUT", "BUILD", "DEST", "PREFIX", "BASETEMP", "WORK_TREE", "SITE", "DIST",
                 "INSTALL", "CACHE", "TMP", "TEMP")  # fmt: skip


@dataclass(frozen=True)
class OutputDir:
    """How a builder names its output directory, and whether it empties or replaces it."""

    options: frozenset[str]  # options whose value is the directory (`-d`, `--destination`)
    wipes: bool = True  # empties or replaces it on every run
    wipe_flags: frozenset[str] = frozenset()  # or only with one of these flags
    subcommand: str | None = None  # only for this subcommand (`next export -o`)


def _dirs(*names: str) -> frozenset[str]:
    return frozenset(names)


# Static site generators and builders that EMPTY or REPLACE their output directory (so naming /,
# a system directory or home there deletes it), and those that only write into it.
OUTPUT_DIRS: dict[str, OutputDir] = {
    "hugo": OutputDir(_dirs("-d", "--destination"), wipe_flags=_dirs("--cleanDestinationDir")),
    "mkdocs": OutputDir(_dirs("-d", "--site-dir")),
    "jekyll": OutputDir(_dirs("-d", "--destination")),
    "pelican": OutputDir(_dirs("-o", "--output"), wipe_flags=_dirs("-d", "--delete-output-directory")),
    "zola": OutputDir(_dirs("-o", "--output-dir")),
    "mdbook": OutputDir(_dirs("-d", "--dest-dir")),
    "docusaurus": OutputDir(_dirs("--out-dir")),
    "next": OutputDir(_dirs("-o", "--outdir"), subcommand="export"),
    "ng": OutputDir(_dirs("--output-path")),
    "vite": OutputDir(_dirs("--outDir"), wipe_flags=_dirs("--emptyOutDir")),
    "webpack": OutputDir(_dirs("-o", "--output-path"), wipe_flags=_dirs("--output-clean", "--clean")),
    "webpack-cli": OutputDir(_dirs("-o", "--output-path"), wipe_flags=_dirs("--output-clean", "--clean")),
    "eleventy": OutputDir(_dirs("--output"), wipes=False),
    "astro": OutputDir(_dirs("--outDir"), wipes=False),
    "gatsby": OutputDir(_dirs("--prefix-paths"), wipes=False),
    "pytest": OutputDir(_dirs("--basetemp")),
    "py.test": OutputDir(_dirs("--basetemp")),
    "sphinx-build": OutputDir(_dirs("-d"), wipes=False),
    "quarto": OutputDir(_dirs("--output-dir"), wipes=False),
    "tsc": OutputDir(_dirs("--outDir", "--outdir"), wipes=False),
    "rollup": OutputDir(_dirs("-d", "--dir"), wipes=False),
    "parcel": OutputDir(_dirs("--dist-dir"), wipes=False),
    "pyinstaller": OutputDir(_dirs("--distpath", "--workpath"), wipe_flags=_dirs("-y", "--noconfirm")),
}  # fmt: skip
# Variables whose value a tool reads as more of its own options (`PYTEST_ADDOPTS=--basetemp=/`).
OPTION_VARIABLES: dict[str, tuple[str, ...]] = {
    "PYTEST_ADDOPTS": ("pytest", "py.test"),
    "HUGO_DESTINATION": ("hugo",),
}
_DIR_VARIABLES: dict[str, str] = {"HUGO_DESTINATION": "--destination"}
# `<TOOL>_ADDOPTS`, `<TOOL>_OPTS`…: read as more of that tool's options too.
_OPTION_SUFFIXES = ("ADDOPTS", "OPTS", "OPTIONS", "ARGS", "FLAGS")


def storage_wipe(inv: Invocation) -> str | None:
    """`zpool destroy`, `lvremove`, `mdadm --zero-superblock`: storage destroyed whatever it is."""
    verbs = _STORAGE.get(inv.program)
    if verbs is None:
        return None
    if "*" in verbs or any(a in verbs for a in inv.argv[1:]):
        return f"destroys storage ({inv.program})"
    return None


def effects(inv: Invocation) -> Iterator[Effect]:
    """Every destructive effect of one invocation (program words, options, redirects, environment)."""
    for redirect in inv.command.redirects:
        if redirect.writes and redirect.target is not None:
            verb: Verb = "append" if ">>" in redirect.op else "overwrite"
            yield _effect(verb, redirect.target, f"redirect {redirect.op}")
    handler = _PROGRAMS.get(inv.program)
    if handler is None and interpreter_family(inv.program) in ("perl", "ruby"):
        handler = _in_place
    if handler is not None:
        yield from handler(inv)
    yield from _output_dirs(inv)
    yield from _option_effects(inv)
    yield from _environment_effects(inv)


def _effect(verb: Verb, word: Word | str, why: str, *, recursive: bool = False) -> Effect:
    if isinstance(word, str):
        return Effect(verb, word, why, recursive)
    alternatives = word.candidates()[1:] if UNKNOWN in word.text else ()
    return Effect(verb, word.text, why, recursive, alternatives)


def _operands(inv: Invocation, valued: frozenset[str] = frozenset()) -> list[Word]:
    """Non-option words (everything after `--`), skipping the values of `valued` options."""
    out: list[Word] = []
    words = inv.words[1:]
    i = 0
    while i < len(words):
        text = words[i].text
        if text == "--":
            out.extend(words[i + 1 :])
            break
        if text.startswith("-") and text != "-":
            i += 2 if text in valued else 1
            continue
        out.append(words[i])
        i += 1
    return out


def _has_flag(inv: Invocation, short: str, long: tuple[str, ...] = ()) -> bool:
    """A short flag (alone or in a cluster) or a long one as GNU getopt reads it (`--rec`)."""
    for text in inv.argv[1:]:
        if text == "--":
            return False
        if (
            text.startswith("--")
            and len(text) > 3
            and any(name.startswith(text.split("=")[0]) for name in long)
        ):
            return True
        if text.startswith("-") and not text.startswith("--") and short in text[1:]:
            return True
    return False


def _long_name(text: str, names: frozenset[str]) -> str | None:
    """The option of `names` that `text` (`--target-d`, `--basetemp`) spells, allowing prefixes."""
    if text in names:
        return text
    if text.startswith("--") and len(text) >= 6:
        matches = [n for n in names if n.startswith(text)]
        return matches[0] if matches else None
    return None


def _value(inv: Invocation, names: frozenset[str]) -> Iterator[Word]:
    """Values of options in `names`, as `--opt value`, `--opt=value` or `-Xvalue` (short names)."""
    words = inv.words
    for i, word in enumerate(words[1:], start=1):
        text = word.text
        name, eq, rest = text.partition("=")
        if eq and _long_name(name, names) is not None:
            yield Word(text=rest, plain=word.plain, alternatives=word.alternatives)
        elif _long_name(text, names) is not None and i + 1 < len(words):
            yield words[i + 1]
        elif len(text) > 2 and text[:2] in names and not text.startswith("--"):
            yield Word(text=text[2:], plain=word.plain)


def _rm(inv: Invocation) -> Iterator[Effect]:
    recursive = _has_flag(inv, "r", ("--recursive",)) or _has_flag(inv, "R")
    for word in _operands(inv):
        yield _effect("destroy", word, inv.program, recursive=recursive)


def _rmdir(inv: Invocation) -> Iterator[Effect]:
    parents = _has_flag(inv, "p", ("--parents",))
    for word in _operands(inv):
        yield _effect("destroy", word, inv.program, recursive=parents)


def _unlink(inv: Invocation) -> Iterator[Effect]:
    for word in _operands(inv):
        yield _effect("destroy", word, inv.program)


def _overwrite_operands(valued: frozenset[str]) -> Callable[[Invocation], Iterator[Effect]]:
    def handler(inv: Invocation) -> Iterator[Effect]:
        append = inv.program == "tee" and _has_flag(inv, "a", ("--append",))
        for word in _operands(inv, valued):
            yield _effect("append" if append else "overwrite", word, inv.program)

    return handler


def _dd(inv: Invocation) -> Iterator[Effect]:
    for word in inv.words[1:]:
        if word.text.startswith("of="):
            yield _effect("overwrite", word.text[3:], "dd of=")


def _copy(inv: Invocation) -> Iterator[Effect]:
    """cp/install/ln: the destination (last operand, or `-t DIR`) is written."""
    targets = list(_value(inv, frozenset({"-t", "--target-directory"})))
    valued = frozenset({"-t", "--target-directory", "-m", "--mode", "-o", "--owner", "-g", "--group",
                        "-S", "--suffix"})  # fmt: skip
    operands = _operands(inv, valued)
    if not targets and (len(operands) > 1 or (inv.program == "install" and _has_flag(inv, "d"))):
        targets = operands if _has_flag(inv, "d") and inv.program == "install" else operands[-1:]
    for word in targets:
        yield _effect("into", word, inv.program)


def _mv(inv: Invocation) -> Iterator[Effect]:
    targets = list(_value(inv, frozenset({"-t", "--target-directory"})))
    operands = _operands(inv, frozenset({"-t", "--target-directory", "-S", "--suffix"}))
    sources = operands if targets else operands[:-1]
    for word in sources:
        yield _effect("destroy", word, "mv (moves it away)", recursive=True)
    for word in targets or operands[-1:]:
        yield _effect("into", word, "mv")


def _rsync(inv: Invocation) -> Iterator[Effect]:
    operands = _operands(inv, frozenset({"-e", "--rsh", "--exclude", "--include", "-f"}))
    if len(operands) < 2:
        return
    *sources, dest = operands
    deletes = any(a.startswith(("--del", "--delete")) for a in inv.argv[1:])
    if ":" not in dest.text.split("/", 1)[0]:
        yield _effect("destroy" if deletes else "into", dest, "rsync --delete" if deletes else "rsync",
                      recursive=True)  # fmt: skip
    if "--remove-source-files" in inv.argv:
        for word in sources:
            yield _effect("destroy", word, "rsync --remove-source-files", recursive=True)


def _tar(inv: Invocation) -> Iterator[Effect]:
    args = inv.argv[1:]
    old_style = bool(args) and not args[0].startswith("-") and "x" in args[0]
    extract = old_style or _has_flag(inv, "x", ("--extract", "--get"))
    if extract:
        dirs = list(_value(inv, frozenset({"-C", "--directory"}))) or [Word(text=".")]
        for word in dirs:
            yield _effect("into", word, "tar extracts into it", recursive=True)
    if "--remove-files" in args:
        for word in _operands(inv, frozenset({"-f", "--file", "-C", "--directory"})):
            yield _effect("destroy", word, "tar --remove-files", recursive=True)


def _mode(inv: Invocation) -> Iterator[Effect]:
    recursive = _has_flag(inv, "R", ("--recursive",))
    valued = frozenset({"-m", "-x", "-M", "-X", "--modify", "--remove", "--set"})
    operands = _operands(inv, valued)
    if inv.program != "setfacl" and not any(a.startswith("--reference") for a in inv.argv):
        operands = operands[1:]  # the mode, owner or attribute
    for word in operands:
        yield _effect("mode", word, inv.program, recursive=recursive)


def _git(inv: Invocation) -> Iterator[Effect]:
    """`git -C DIR clean -fdx`, `git --work-tree=/ checkout -f .`: the work tree is the target."""
    args = inv.words[1:]
    place = "."
    tree: str | None = None
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        text = args[i].text
        if text == "-C" and i + 1 < len(args):
            value = args[i + 1].text
            place = value if value.startswith("~") else posixpath.join(place, value)
            i += 2
            continue
        if text in ("--work-tree", "--git-dir") and i + 1 < len(args):
            tree = args[i + 1].text if text == "--work-tree" else tree
            i += 2
            continue
        if text.startswith("--work-tree="):
            tree = text.split("=", 1)[1]
        i += 1
    sub = args[i].text if i < len(args) else ""
    root = posixpath.join(place, tree) if tree is not None else place
    env_tree = dict(_assignments(inv)).get("GIT_WORK_TREE")
    roots = [root] + ([env_tree] if env_tree is not None else [])
    rest = {w.text for w in args[i + 1 :]}
    for target in roots:
        if sub == "clean" and not rest & {"-n", "--dry-run"}:
            yield Effect("destroy", target, "git clean", True)
        elif sub in (
            "checkout",
            "switch",
            "reset",
            "restore",
            "stash",
            "rm",
            "mv",
            "merge",
            "pull",
            "rebase",
            "cherry-pick",
            "revert",
            "apply",
            "am",
            "read-tree",
            "checkout-index",
        ):
            yield Effect("into", target, f"git {sub} writes the work tree", True)  # fmt: skip
    if sub == "rm":
        recursive = any(w.text.startswith("-") and "r" in w.text for w in args[i + 1 :])
        for word in args[i + 1 :]:
            if not word.text.startswith("-"):
                yield _effect("destroy", word, "git rm", recursive=recursive)
    if sub == "worktree" and i + 2 < len(args) and args[i + 1].text == "remove":
        yield _effect("destroy", args[-1], "git worktree remove", recursive=True)


def _cargo(inv: Invocation) -> Iterator[Effect]:
    if "clean" in inv.argv[1:3] and not list(_value(inv, frozenset({"--target-dir"}))):
        env = dict(_assignments(inv)).get("CARGO_TARGET_DIR")
        manifests = [posixpath.dirname(w.text) for w in _value(inv, frozenset({"--manifest-path"}))]
        target = posixpath.join(manifests[-1] or ".", "target") if manifests else "target"
        yield Effect("destroy", env if env is not None else target, "cargo clean", True)


def _make(inv: Invocation) -> Iterator[Effect]:
    dirs = list(_value(inv, frozenset({"-C", "--directory"})))
    cleaning = bool(set(inv.argv[1:]) & CLEAN_VERBS)
    for word in dirs:
        yield _effect("destroy" if cleaning else "into", word, "make -C", recursive=True)
    for word in inv.words[1:]:
        name, eq, value = word.text.partition("=")
        if eq and _dir_like(name) and value:
            yield Effect("destroy" if cleaning else "into", value, f"make {name}=", True)


def _cmake(inv: Invocation) -> Iterator[Effect]:
    args = inv.argv[1:]
    if len(args) >= 2 and args[0] == "-E":
        tool = args[1]
        words = inv.words[3:]
        if tool in ("rm", "remove", "remove_directory"):
            recursive = tool == "remove_directory" or any(w.text in ("-r", "-R", "-rf", "-fr") for w in words)
            for word in words:
                if not word.text.startswith("-"):
                    yield _effect("destroy", word, f"cmake -E {tool}", recursive=recursive)
        elif tool == "rename" and words:
            yield _effect("destroy", words[0], "cmake -E rename", recursive=True)
    for word in _value(inv, frozenset({"--prefix"})):
        yield _effect("into", word, "cmake --install --prefix", recursive=True)


def _mkdocs(inv: Invocation) -> Iterator[Effect]:
    for word in _value(inv, frozenset({"-d", "--site-dir"})):
        yield _effect("destroy", word, "mkdocs cleans its site directory", recursive=True)


def _pytest(inv: Invocation) -> Iterator[Effect]:
    for word in _value(inv, frozenset({"--basetemp"})):
        yield _effect("destroy", word, "pytest deletes its --basetemp", recursive=True)


def _python(inv: Invocation) -> Iterator[Effect]:
    argv = inv.argv
    if (
        "-m" in argv
        and argv.index("-m") + 1 < len(argv)
        and argv[argv.index("-m") + 1] in ("pytest", "py.test")
    ):
        yield from _pytest(inv)


def _sed(inv: Invocation) -> Iterator[Effect]:
    if not _has_flag(inv, "i", ("--in-place",)) and not any(a.startswith("--in-place") for a in inv.argv):
        return
    valued = frozenset({"-e", "--expression", "-f", "--file", "-l", "--line-length"})
    operands = _operands(inv, valued)
    if not any(
        a in ("-e", "--expression", "-f", "--file") or a.startswith("--expression=") for a in inv.argv
    ):
        operands = operands[1:]  # the script
    for word in operands:
        yield _effect("overwrite", word, "sed -i")


# perl and ruby short letters whose value is the rest of the cluster or the next word (`-i` takes
# only the rest: its backup suffix).
_CODE_VALUED = "eEIMmrx0l"


def _in_place(inv: Invocation) -> Iterator[Effect]:
    """`perl -i -pe CODE FILES`, `ruby -i.bak -pe …`: every file operand is rewritten, like `sed -i`."""
    if inv.inline_code is None:
        return
    in_place = False
    operands: list[Word] = []
    skip = False
    for word in inv.words[1:]:
        text = word.text
        if skip:
            skip = False
        elif text.startswith("-") and len(text) > 1 and not text.startswith("--"):
            for at, letter in enumerate(text[1:], start=1):
                if letter == "i":
                    in_place = True
                    break
                if letter in _CODE_VALUED:
                    skip = not text[at + 1 :] and letter in "eEIMmr"
                    break
        elif not text.startswith("--"):
            operands.append(word)
    if in_place:
        for word in operands:
            yield _effect("overwrite", word, f"{inv.program} -i")


def _unzip(inv: Invocation) -> Iterator[Effect]:
    for word in _value(inv, frozenset({"-d"})):
        yield _effect("into", word, "unzip -d", recursive=True)


def _find(inv: Invocation) -> Iterator[Effect]:
    """`find ROOTS … -delete` or `-exec rm {} +`: everything under the roots is at stake."""
    texts = [w.text for w in inv.words]
    roots: list[Word] = []
    for word in inv.words[1:]:
        if word.text.startswith(("-", "(", "!")):
            break
        roots.append(word)
    verb: Verb | None = "destroy" if "-delete" in texts else None
    for i, text in enumerate(texts):
        if text in ("-exec", "-execdir", "-ok", "-okdir") and i + 1 < len(texts):
            body = posixpath.basename(texts[i + 1])
            if body in _DESTROYERS:
                verb = "destroy"
            elif body in ("chmod", "chown", "chgrp", "chattr", "setfacl") and verb is None:
                verb = "mode"
            elif body in ("truncate", "shred", "dd", "tee", "cp", "sed") and verb is None:
                verb = "overwrite"
        elif text in ("-fprint", "-fprint0", "-fprintf", "-fls") and i + 1 < len(texts):
            yield _effect("overwrite", inv.words[i + 1], f"find {text}")
    if verb is not None:
        for word in roots or [Word(text=".")]:
            yield _effect(verb, word, "find with -delete or -exec", recursive=True)


_DESTROYERS = frozenset({"rm", "rmdir", "unlink", "shred", "mv", "srm", "wipe"})
# Programs whose words are text to show or search, never places they clean.
_PRINTERS = frozenset(
    "echo printf git rm grep egrep fgrep rg ag man info which type apropos whatis logger".split()  # noqa: SIM905
)


def _cleaned_places(inv: Invocation) -> Iterator[Effect]:
    """`dotnet clean /`, `mvn clean -f /pom.xml`, `gradle clean -p /`: a clean aimed at a place."""
    for word in inv.words[1:]:
        text = word.text.split("=", 1)[1] if word.text.startswith("-") and "=" in word.text else word.text
        if text.startswith(("/", "~")):
            yield _effect("destroy", text, f"{inv.program} cleaning", recursive=True)
            if "." in posixpath.basename(text):
                yield _effect(
                    "destroy", posixpath.dirname(text) or "/", f"{inv.program} cleaning", recursive=True
                )


def _container_mounts(inv: Invocation) -> Iterator[Effect]:
    """`docker run -v /:/host …`: the host's root, writable, inside a container."""
    if inv.program not in ("docker", "podman", "nerdctl") or not {"run", "create"} & set(inv.argv[1:4]):
        return
    for word in _value(inv, frozenset({"-v", "--volume"})):
        source, _, rest = word.text.partition(":")
        if rest and not rest.endswith((":ro", ":readonly")):
            yield Effect("into", source, f"{inv.program} mounts it writable", True)
    for word in _value(inv, frozenset({"--mount"})):
        fields = dict(f.partition("=")[::2] for f in word.text.split(","))
        source = fields.get("source", fields.get("src", ""))
        if source and "readonly" not in fields and fields.get("ro") not in ("", "true", "1"):
            yield Effect("into", source, f"{inv.program} mounts it writable", True)


def _option_effects(inv: Invocation) -> Iterator[Effect]:
    """`--basetemp=/usr`, `--target-dir /` with `clean`, `--prefix /usr uninstall` on any program."""
    cleaning = bool(set(inv.argv[1:]) & CLEAN_VERBS)
    subcommand = next((a for a in inv.argv[1:] if not a.startswith("-")), "")
    if subcommand in CLEAN_VERBS and inv.program not in _PRINTERS:
        yield from _cleaned_places(inv)
    yield from _container_mounts(inv)
    for word in _value(inv, _OUTPUT_OPTIONS):
        if word.text.startswith(("/", "~", "..")):
            yield _effect("overwrite", word, f"{inv.program} writes its output there")
    for word in _value(inv, _WIPE_OPTIONS):
        yield _effect("destroy", word, "a directory the tool wipes", recursive=True)
    for word in _value(inv, _INTO_OPTIONS):
        if word.text:
            verb: Verb = "destroy" if cleaning else "into"
            yield _effect(verb, word, f"{inv.program} writes there", recursive=True)


def _tool(inv: Invocation) -> str:
    """The program, or the module of `python -m module`."""
    argv = inv.argv
    if inv.program.startswith("python") and "-m" in argv and argv.index("-m") + 1 < len(argv):
        return argv[argv.index("-m") + 1]
    return inv.program


def _with_option_variables(inv: Invocation, tool: str) -> Invocation:
    """The invocation with the options its environment hands it (`PYTEST_ADDOPTS`) appended."""
    extra: list[Word] = []
    own = {f"{tool.upper().replace('-', '_').replace('.', '_')}_{suffix}" for suffix in _OPTION_SUFFIXES}
    for name, value in _assignments(inv):
        if tool not in OPTION_VARIABLES.get(name, ()) and name.upper() not in own:
            continue
        if name in _DIR_VARIABLES:
            extra.extend((Word(text=_DIR_VARIABLES[name]), Word(text=value)))
            continue
        try:
            extra.extend(Word(text=t) for t in shlex.split(value))
        except ValueError:
            extra.extend(Word(text=t) for t in value.split())
    if not extra:
        return inv
    return replace(inv, words=(*inv.words, *extra), argv=(*inv.argv, *(w.text for w in extra)))


def _output_dirs(inv: Invocation) -> Iterator[Effect]:
    """`hugo --cleanDestinationDir -d /`, `mkdocs build -d ~`: a builder's output directory."""
    tool = _tool(inv)
    if tool == "sphinx-build":
        # `-M clean SRC BUILD` deletes BUILD; otherwise the output directory is only written (-E
        # rereads the sources, it does not empty the output).
        operands = _operands(inv, frozenset({"-M", "-b", "-d", "-c", "-D", "-A", "-j", "-w"}))
        verb: Verb = "destroy" if "clean" in inv.argv[1:3] and "-M" in inv.argv[1:3] else "into"
        for word in operands[1:2]:
            yield _effect(verb, word, "sphinx-build output directory", recursive=True)
    table = OUTPUT_DIRS.get(tool)
    if table is None:
        return
    if table.subcommand is not None and table.subcommand not in inv.argv[1:3]:
        return
    inv = _with_option_variables(inv, tool)
    if tool in ("pytest", "py.test") and "--cache-clear" in inv.argv:
        # `--cache-clear` deletes the cache directory, wherever `-o cache_dir=` puts it.
        for word in _value(inv, frozenset({"-o", "--override-ini"})):
            key, eq, value = word.text.partition("=")
            if eq and key.strip() == "cache_dir" and value:
                yield _effect("destroy", value, "pytest --cache-clear deletes its cache_dir", recursive=True)
    wipes = table.wipes and (
        not table.wipe_flags or any(a.split("=")[0] in table.wipe_flags for a in inv.argv[1:])
    )
    for word in _value(inv, table.options):
        if word.text:
            verb = "destroy" if wipes else "into"
            yield _effect(
                verb, word, f"{tool} {'empties' if wipes else 'writes'} its output directory", recursive=True
            )


def _assignments(inv: Invocation) -> list[tuple[str, str]]:
    """Environment assignments in effect for this run that the text shows (prefix, `env X=…`, export)."""
    found = [(name, word.text) for name, word in inv.command.environment]
    for word in inv.command.words:
        name, eq, value = word.text.partition("=")
        if eq and name.isidentifier() and word.text.split("=", 1)[0] == name:
            found.append((name, value))
    return found


def _dir_like(name: str) -> bool:
    upper = name.upper()
    return upper not in ("PATH", "OLDPWD", "PWD") and (upper.endswith(_DIR_SUFFIXES) or "_DIR" in upper)


def _environment_effects(inv: Invocation) -> Iterator[Effect]:
    """`SOMETOOL_TARGET_DIR=/usr sometool clean`, `HOME=/etc tool`: the value is where it writes."""
    cleaning = bool(set(inv.argv[1:]) & CLEAN_VERBS)
    for name, value in _assignments(inv):
        if not value or not _dir_like(name):
            continue
        upper = name.upper()
        output = upper == "HOME" or upper.startswith("XDG_") or any(m in upper for m in _OUTPUT_MARKS)
        if cleaning:
            yield Effect("destroy", value, f"{name}= with {inv.program} cleaning", True)
        elif output:
            yield Effect("into", value, f"{inv.program} writes where {name} says", True)


_PROGRAMS: dict[str, Callable[[Invocation], Iterator[Effect]]] = {
    "rm": _rm, "srm": _rm, "wipe": _rm, "rmdir": _rmdir, "unlink": _unlink,
    "shred": _overwrite_operands(frozenset({"-n", "--iterations", "-s", "--size", "--random-source"})),
    "truncate": _overwrite_operands(frozenset({"-s", "--size", "-r", "--reference"})),
    "tee": _overwrite_operands(frozenset()),
    "dd": _dd, "cp": _copy, "install": _copy, "ln": _copy, "mv": _mv, "rsync": _rsync,
    "tar": _tar, "gtar": _tar, "bsdtar": _tar, "chmod": _mode, "chown": _mode, "chgrp": _mode,
    "chattr": _mode, "setfacl": _mode, "git": _git, "cargo": _cargo, "make": _make, "gmake": _make,
    "cmake": _cmake, "mkdocs": _mkdocs, "pytest": _pytest, "py.test": _pytest, "python": _python,
    "python3": _python, "sed": _sed, "gsed": _sed, "unzip": _unzip, "find": _find,
}  # fmt: skip
