"""Shell words: de-quote tree-sitter word nodes into text, remembering what was not plain."""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tree_sitter as ts

from approvals.permissions.budget import TooComplex, spend

# Stands for a part of a word whose value the parse cannot know ($VAR, $(…), $((…))).
UNKNOWN = "\x00"
# Variables whose value is the caller's context: `$HOME` at a word's start is home, `$PWD` the cwd.
_CONTEXT_VARIABLES = {"HOME": "~", "PWD": "."}
_DEFAULT_OPERATORS = frozenset({":-", "-", ":=", "=", ":?", "?"})
_GLOB = re.compile(r"[*?\[]")
_REVISION_TEXT = re.compile(r"[.^~0-9A-Za-z_\-]*")
_ANSI_SIMPLE = {
    "n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f",
    "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip
_ANSI_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)", re.S)


# Parts of one word (`a'b'"c"$d…`) past which the text is refused rather than read.
MAX_WORD_PARTS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class Word:
    """One shell word after quote removal; `text` holds UNKNOWN where a value is unknowable."""

    text: str
    plain: bool = True  # no expansion or substitution of any kind
    quoted: bool = False  # quotes or backslashes were used
    obfuscated: bool = False  # ANSI-C quoting, `$"…"`, backslash before a letter
    glob: bool = False  # unquoted *, ? or [ (pathname expansion applies)
    substitution: bool = False  # contains $(…), backticks or <(…)
    process_substitution: bool = False
    variables: tuple[str, ...] = ()
    # Values the word may take besides `text` (each UNKNOWN empty, or a `${X:-default}`).
    alternatives: tuple[str, ...] = ()
    # The whole word is a substitution that only prints names of workspace files (listings.py).
    listing: bool = False
    # The whole word is a substitution that only prints a git revision (`$(git rev-parse HEAD~1)`).
    revision: bool = False

    def candidates(self) -> tuple[str, ...]:
        """Texts the word may expand to, UNKNOWN parts read as empty (how `rm -rf "$D"/*` hits /)."""
        if UNKNOWN not in self.text:
            return (self.text,)
        return (self.text, self.text.replace(UNKNOWN, ""), *self.alternatives)


def _join(parts: Sequence[Word]) -> Word:
    if len(parts) == 1:
        return parts[0]
    text = "".join(p.text for p in parts)
    alternatives: list[str] = []
    for i, part in enumerate(parts):
        for alt in part.alternatives:
            alternatives.append(
                "".join(p.text for p in parts[:i]) + alt + "".join(p.text for p in parts[i + 1 :])
            )
    return Word(
        text=text,
        plain=all(p.plain for p in parts),
        quoted=any(p.quoted for p in parts),
        obfuscated=any(p.obfuscated for p in parts),
        glob=any(p.glob for p in parts),
        substitution=any(p.substitution for p in parts),
        process_substitution=any(p.process_substitution for p in parts),
        variables=tuple(v for p in parts for v in p.variables),
        alternatives=tuple(alternatives[:8]),
        # `$(git describe --abbrev=0)..HEAD`: a revision range is still a revision.
        revision=any(p.revision for p in parts)
        and all(p.revision or (p.plain and _REVISION_TEXT.fullmatch(p.text)) for p in parts),
    )


def decode_ansi_c(body: str) -> str:
    """Decode the inside of `$'…'` the way bash does."""

    def one(match: re.Match[str]) -> str:
        """Decode one escape sequence."""
        esc = match.group(1)
        if esc[0] in "xuU":
            return chr(int(esc[1:], 16))
        if esc[0] in "01234567":
            return chr(int(esc, 8) & 0xFF)
        if esc[0] == "c" and len(esc) == 2:
            return chr(ord(esc[1].upper()) ^ 0x40)
        return _ANSI_SIMPLE.get(esc, "\\" + esc)

    return _ANSI_ESCAPE.sub(one, body)


def _printf(fmt: str, args: list[str]) -> str | None:
    """`printf` with only %s/%b/%% conversions (what obfuscation uses); None for anything else."""
    if re.search(r"%(?![sb%])", fmt):
        return None
    values = iter(args)
    out = re.sub(r"%([sb%])", lambda m: "%" if m.group(1) == "%" else next(values, ""), fmt)
    return decode_ansi_c(out)


def _unescape_unquoted(raw: str) -> tuple[str, bool]:
    out: list[str] = []
    escaped_letter = False
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            escaped_letter = escaped_letter or nxt.isalnum()
            if nxt != "\n":
                out.append(nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out), escaped_letter


def _unescape_double(raw: str) -> str:
    return re.sub(r'\\([\\"$`\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), raw)


class WordReader:
    """Turns word nodes into `Word`s; hands substitution bodies back to the statement walker."""

    def __init__(
        self,
        on_substitution: Callable[[ts.Node], None],
        on_problem: Callable[[str], None],
        source: bytes,
        is_listing: Callable[[Sequence[Sequence[str]]], bool] = lambda stages: False,
        is_revision: Callable[[Sequence[Sequence[str]]], bool] = lambda stages: False,
    ) -> None:
        self._on_substitution = on_substitution
        self._on_problem = on_problem
        self._source = source
        self._is_listing = is_listing
        self._is_revision = is_revision
        # Variables the script itself set, in document order: a value, or None once it is unknowable.
        self.bindings: dict[str, str | None] = {}
        # Loop variables while their loop body is walked: the value of the current pass.
        self.loop_values: dict[str, Word] = {}
        # Variables whose *value* bash evaluates again: arithmetic, `${x@P}`, `${!x}`.
        self.evaluated_names: list[str] = []
        self._depth = 0

    def note_arithmetic(self, node: ts.Node) -> None:
        """Remember the variables an arithmetic context evaluates (`$((x))`, `(( x ))`)."""
        stack = [node]
        while stack and len(self.evaluated_names) < 256:
            current = stack.pop()
            if current.type == "variable_name" and current.end_byte > current.start_byte:
                self.evaluated_names.append(self._text(current))
            stack.extend(current.children)

    def _text(self, node: ts.Node) -> str:
        return self._source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def read_group(self, nodes: Sequence[ts.Node]) -> Word:
        """Adjacent nodes with no space between them form one word (`$"x"` arrives as two)."""
        if len(nodes) == 2 and nodes[0].type == "$" and nodes[1].type == "string":
            inner = self.read(nodes[1])
            return Word(text=inner.text, plain=inner.plain, quoted=True, obfuscated=True)
        return _join([self.read(n) for n in nodes])

    def read(self, node: ts.Node) -> Word:
        """De-quote one word-like node (depth-capped like the statement walk)."""
        self._depth += 1
        try:
            if self._depth > 64:
                raise TooComplex("words nested deeper than 64 levels")
            return self._read(node)
        finally:
            self._depth -= 1

    def _read(self, node: ts.Node) -> Word:
        kind = node.type
        raw = self._text(node)
        if kind in ("word", "number", "variable_name", "special_variable_name"):
            text, escaped_letter = _unescape_unquoted(raw)
            glob = bool(_GLOB.search(re.sub(r"\\.", "", raw)))
            return Word(text=text, quoted="\\" in raw, obfuscated=escaped_letter, glob=glob)
        if kind == "raw_string":
            return Word(text=raw[1:-1], quoted=True)
        if kind == "ansi_c_string":
            return Word(text=decode_ansi_c(raw[2:-1]), quoted=True, obfuscated=True)
        if kind in ("string", "translated_string"):
            return self._string(node)
        if kind == "concatenation":
            if node.child_count > MAX_WORD_PARTS:
                raise TooComplex(f"a word of more than {MAX_WORD_PARTS} parts")
            return _join([self.read(c) for c in node.children])
        if kind in ("simple_expansion", "expansion"):
            return self._expansion(node)
        if kind in ("command_substitution", "process_substitution"):
            return self._substitution(node)
        if kind == "arithmetic_expansion":
            self.note_arithmetic(node)
            self._scan(node)
            return Word(text=UNKNOWN, plain=False)
        if kind in ("$", "brace_expression", "extglob_pattern", "regex", "string_content"):
            return Word(text=raw, glob=kind != "$")
        if kind in ("ERROR",) or node.is_missing:
            self._on_problem("the shell text does not parse cleanly")
        else:
            self._on_problem(f"unsupported shell word: {kind}")
        self._scan(node)
        return Word(text=UNKNOWN, plain=False)

    def _substitution(self, node: ts.Node) -> Word:
        """`$(...)`, backticks or `<(...)`: the inner commands are judged; the word is what bash passes."""
        for child in node.children:
            if child.is_named or child.is_error:
                self._on_substitution(child)
        if node.type == "process_substitution":
            # What the program receives is a pipe's path, e.g. /dev/fd/63.
            return Word(text="/dev/fd/63", plain=False, substitution=True, process_substitution=True)
        static = self._static_output(node)
        if static is not None:
            return Word(text=static, plain=False, substitution=True, obfuscated=True)
        stages = self._plain_stages(node)
        listing = stages is not None and self._is_listing(stages)
        revision = stages is not None and self._is_revision(stages)
        return Word(text=UNKNOWN, plain=False, substitution=True, listing=listing, revision=revision)

    def _plain_stages(self, node: ts.Node) -> list[list[str]] | None:
        """The argv of each stage of a substitution that is a pipeline of plain words, else None."""
        named = [c for c in node.children if c.is_named]
        if len(named) != 1:
            return None
        if named[0].type == "command":
            argv = self._plain_argv(node)
            return None if argv is None else [argv]
        if named[0].type != "pipeline" or any(not c.is_named and c.type != "|" for c in named[0].children):
            return None
        stages = [self._command_argv(c) for c in named[0].children if c.is_named]
        return None if any(a is None for a in stages) else [a for a in stages if a is not None]

    def _plain_argv(self, node: ts.Node) -> list[str] | None:
        """The words of a substitution that is one simple command of plain words, else None."""
        named = [c for c in node.children if c.is_named]
        if len(named) != 1:
            return None
        return self._command_argv(named[0])

    def _command_argv(self, command: ts.Node) -> list[str] | None:
        """The words of one simple command when all are plain (no redirects, no expansions)."""
        if command.type != "command":
            return None
        parts = [c.children[0] if c.type == "command_name" and c.child_count else c for c in command.children]
        if not all(p.type in ("word", "raw_string", "string", "number") for p in parts):
            return None
        words = [self.read(p) for p in parts]
        if not words or not all(w.plain for w in words):
            return None
        return [w.text for w in words]

    def _static_output(self, node: ts.Node) -> str | None:
        r"""What `$(echo rm)`, `$(printf '\x72m')` or `$(which rm)` prints, when it is that simple."""
        argv = self._plain_argv(node)
        if argv is None:
            return None
        program, args = argv[0], argv[1:]
        if program == "echo":
            flags = [a for a in args if a in ("-n", "-e", "-E", "-ne", "-en")]
            text = " ".join(a for a in args if a not in flags)
            return decode_ansi_c(text) if any("e" in f for f in flags) else text
        if program == "printf" and args:
            return _printf(args[0], args[1:])
        if program in ("which", "command", "type") and args:
            return args[-1]
        if program == "dirname" and len(args) == 1:
            return posixpath.dirname(args[0].rstrip("/")) or "/"
        if program == "basename" and len(args) == 1:
            return posixpath.basename(args[0].rstrip("/"))
        if program == "pwd" and not args:
            return "."
        return None

    def _scan(self, node: ts.Node) -> None:
        for child in node.children:
            if child.type in ("command_substitution", "process_substitution"):
                self.read(child)
            elif child.child_count:
                self._scan(child)

    def _string(self, node: ts.Node) -> Word:
        parts: list[Word] = []
        for child in node.children:
            if child.type == "string_content":
                parts.append(Word(text=_unescape_double(self._text(child)), quoted=True))
            elif child.type == "$":
                parts.append(Word(text="$", quoted=True))
            elif child.is_named:
                parts.append(self.read(child))
        if not parts:
            return Word(text="", quoted=True)
        joined = _join(parts)
        return Word(
            text=joined.text,
            plain=joined.plain,
            quoted=True,
            obfuscated=joined.obfuscated,
            substitution=joined.substitution,
            variables=joined.variables,
            alternatives=joined.alternatives,
            listing=joined.listing,
            revision=joined.revision,
        )

    def _expansion(self, node: ts.Node) -> Word:
        names = [c for c in node.children if c.type in ("variable_name", "special_variable_name")]
        name = self._text(names[0]) if names else ""
        kinds = [c.type for c in node.children]
        if name and (kinds[1:2] == ["!"] or ("@" in kinds and "P" in self._text(node)[-3:])):
            self.evaluated_names.append(name)  # `${!x}`, `${x@P}`: x's value is expanded again
        simple = node.type == "simple_expansion" or [c.type for c in node.children] == [
            "${",
            "variable_name",
            "}",
        ]
        loop_value = self.loop_values.get(name) if name not in self.bindings else None
        if simple and loop_value is not None:
            # `for f in *.py; do black $f; done`: one of the loop's words (judged once per word).
            return Word(
                text=loop_value.text, plain=False, glob=loop_value.glob, listing=loop_value.listing,
                variables=(name,),
            )  # fmt: skip
        if loop_value is not None and not loop_value.listing and _suffix_removal(node):
            # `${f%.txt}.md`: a suffix of a loop word removed stays in the word's directory.
            directory = posixpath.dirname(loop_value.text)
            text = posixpath.join(directory, "*") if directory else "*"
            return Word(text=text, plain=False, glob=True, variables=(name,))
        if simple and name in _CONTEXT_VARIABLES:
            return Word(text=_CONTEXT_VARIABLES[name], plain=False, variables=(name,))
        if name in _CONTEXT_VARIABLES and name not in self.bindings:
            # `${HOME%/}`, `${HOME:-x}`, `${HOME#}`: still (maybe) the home directory itself.
            return Word(
                text=UNKNOWN, plain=False, variables=(name,), alternatives=(_CONTEXT_VARIABLES[name],)
            )
        bound = self.bindings.get(name)
        if simple and bound is not None:
            # `f=/; rm -rf $f`: the script set it once to a plain value, so that is what it holds.
            return Word(text=bound, plain=False, variables=(name,))
        alternatives: list[str] = []
        children = list(node.children)
        for i, child in enumerate(children):
            if child.type in _DEFAULT_OPERATORS and i + 1 < len(children) and children[i + 1].is_named:
                alternatives.append(self.read(children[i + 1]).text)
            elif child.type in ("command_substitution", "process_substitution", "arithmetic_expansion"):
                self.read(child)
        return Word(
            text=UNKNOWN, plain=False, variables=(name,) if name else (), alternatives=tuple(alternatives)
        )


def _suffix_removal(node: ts.Node) -> bool:
    """`${name%pattern}` or `${name%%pattern}` with a literal pattern."""
    kinds = [c.type for c in node.children]
    return (
        len(kinds) == 5
        and kinds[:2] == ["${", "variable_name"]
        and kinds[2] in ("%", "%%")
        and kinds[3] in ("regex", "word")
        and kinds[4] == "}"
    )


def skip_options(words: tuple[Word, ...], start: int, valued: frozenset[str], operands: int) -> int:
    """Index of the wrapped command after a wrapper's options and leading operands."""
    i = start
    while i < len(words):
        text = words[i].text
        if text == "--":
            i += 1
            break
        if text.startswith("-") and len(text) > 1:
            i += 2 if text in valued else 1
            continue
        break
    return min(i + operands, len(words))


# Words one brace expansion may produce; more is not judged partially (a dropped word could be
# /etc) but refused: TooComplex, a deny.
MAX_BRACE_VARIANTS = 256
# Longest word brace-expanded; a longer word with a brace pair is refused the same way.
MAX_BRACE_TEXT = 4096


def brace_variants(text: str) -> list[str]:
    """Bash brace expansion (`/{etc,u{s,}r}`, `{a..c}`), nested: every word, or TooComplex.

    Depth first, so pending work stays linear in the text (a breadth-first queue grew 2^n before
    the first complete word); each scan spends work steps, and the deadline is checked with them.
    """
    if "{" not in text or "}" not in text:
        return [text]
    if len(text) > MAX_BRACE_TEXT:
        raise TooComplex(f"brace expansion of a word of {len(text)} chars")
    out: list[str] = []
    pending = [text]
    while pending:
        current = pending.pop()
        spend(len(current) // 4 + 1, "brace expansion")
        split = _first_brace(current)
        if split is None:
            out.append(current)
            if len(out) > MAX_BRACE_VARIANTS:
                raise TooComplex(f"brace expansion over {MAX_BRACE_VARIANTS} words")
            continue
        head, alternatives, tail = split
        if len(alternatives) + len(out) > MAX_BRACE_VARIANTS:
            raise TooComplex(f"brace expansion over {MAX_BRACE_VARIANTS} words")
        pending.extend(head + alt + tail for alt in reversed(alternatives))
        if len(pending) > MAX_BRACE_VARIANTS * 4:
            raise TooComplex(f"brace expansion over {MAX_BRACE_VARIANTS} words")
    return out


def _first_brace(text: str) -> tuple[str, list[str], str] | None:
    """The first `{…}` that bash would expand: (text before, the alternatives, text after).

    One pass with a stack (linear in the text): each `{` remembers where its top-level commas are.
    """
    stack: list[tuple[int, list[int]]] = []
    candidates: list[tuple[int, int, list[int]]] = []
    for i, ch in enumerate(text):
        if ch == "{":
            stack.append((i, []))
        elif ch == "," and stack:
            stack[-1][1].append(i)
        elif ch == "}" and stack:
            open_at, commas = stack.pop()
            candidates.append((open_at, i, commas))
    for open_at, close_at, commas in sorted(candidates):
        if commas:
            bounds = [open_at, *commas, close_at]
            alternatives = [text[a + 1 : b] for a, b in itertools.pairwise(bounds)]
        else:
            sequence = _sequence(text[open_at + 1 : close_at])
            if sequence is None:
                continue
            alternatives = sequence
        return text[:open_at], alternatives, text[close_at + 1 :]
    return None


def _sequence(body: str) -> list[str] | None:
    """`1..3`, `a..c`, `0..10..5`: the words of a sequence expression, or None."""
    pieces = body.split("..")
    if len(pieces) not in (2, 3) or any(len(p) > 18 for p in pieces):
        return None
    first, last = pieces[0], pieces[1]
    step = abs(int(pieces[2])) if len(pieces) == 3 and pieces[2].lstrip("-").isdigit() else 1
    step = step or 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        a, b = int(first), int(last)
        numbers = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        _sequence_cap(len(numbers))
        return [str(n) for n in numbers]
    if len(first) == 1 and len(last) == 1:
        a, b = ord(first), ord(last)
        codes = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        _sequence_cap(len(codes))
        return [chr(c) for c in codes]
    return None


def _sequence_cap(count: int) -> None:
    """A sequence longer than the cap is refused, never cut short."""
    if count > MAX_BRACE_VARIANTS:
        raise TooComplex(f"brace expansion over {count} words (a sequence)")
