"""The shape of parsed shell text: simple commands, their redirects and stdin.

Also small facts about the syntax tree that decide how far the engine may trust it (a plain `&&`
chain, a literal feed).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import tree_sitter as ts

from approvals.permissions.shell.words import UNKNOWN, Word

Stdin = Literal["inherit", "pipe", "heredoc", "herestring", "file"]


@dataclass(frozen=True, slots=True)
class Redirect:
    """One redirection: `op` as written, the target word (None for a descriptor duplication)."""

    op: str
    target: Word | None
    # What a here-string (`<<< text`) feeds to stdin.
    text: str | None = None

    @property
    def writes(self) -> bool:
        """True when the redirect writes its target (`>`, `>>`, `&>`, `<>`)."""
        return self.target is not None and ">" in self.op

    @property
    def reads(self) -> bool:
        """True when the redirect reads its target (`<`, `<>`)."""
        return self.target is not None and "<" in self.op


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One program invocation as the shell would run it, before wrappers are stripped."""

    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...] = ()
    stdin: Stdin = "inherit"
    heredoc: str | None = None
    # argv texts of the previous pipeline stage, when this one reads from a pipe.
    upstream: tuple[str, ...] = ()
    # Variables an unquoted here-document expands (`<<EOF … $TOKEN …`): their values reach stdin.
    heredoc_variables: tuple[str, ...] = ()
    # Assignments in effect as far as the text shows: earlier `X=…`/`export X=…` in the same text,
    # then this command's own prefix (`X=/usr tool clean`), in that order.
    environment: tuple[tuple[str, Word], ...] = ()
    # This command's own prefix assignments only (`X=1 cmd`), judged as environment (environment.py).
    prefix: tuple[tuple[str, Word], ...] = ()


@dataclass(frozen=True, slots=True)
class Script:
    """Every simple command in a piece of shell text, plus reasons it is not plain words."""

    commands: tuple[SimpleCommand, ...]
    problems: tuple[str, ...]
    fork_bomb: bool = False
    # Variables the script itself assigns (loop variables, `x=…`): their values are unknown but local.
    local_names: frozenset[str] = frozenset()
    # The grammar reported an error: the engine also runs the lexical floor check.
    parse_error: bool = False
    # One `a && b && c` chain of simple commands: each runs only after the previous succeeded, so a
    # `cd` in it moves every later command (otherwise any earlier directory stays possible).
    and_chain: bool = False
    # Texts bash will run as commands besides the commands above: stored substitutions reached by
    # arithmetic, `${x@P}` or `${!x}` (`x='a[$(rm -rf /)]'; echo $((x))`).
    evaluated: tuple[str, ...] = ()
    # Why the text is refused outright (too deeply nested, too many words): the engine denies.
    refused: str | None = None


def and_chain(root: ts.Node) -> bool:
    """The whole text is one list of simple commands joined only by `&&` (no `;`, no nesting).

    The text may also be one subshell around such a list: `(cd build && cmake ..)`.
    """
    statements = [c for c in root.children if c.is_named]
    if len(statements) != 1 or any(not c.is_named for c in root.children):
        return False
    if statements[0].type == "subshell" and root.type == "program":
        inner = [c for c in statements[0].children if c.type not in ("(", ")")]
        return len(inner) == 1 and inner[0].is_named and and_chain_inner(inner[0])
    return and_chain_inner(statements[0])


def and_chain_inner(statement: ts.Node) -> bool:
    """One statement that is a `&&` chain of simple commands (or one simple command)."""
    stack = [statement]
    while stack:
        node = stack.pop()
        if node.type == "list":
            if any(not c.is_named and c.type != "&&" for c in node.children):
                return False
            stack.extend(c for c in node.children if c.is_named)
        elif node.type == "redirected_statement":
            # `cd src && ls > out.txt`: the grammar may hang the redirect on the whole list.
            if node.children[0].type not in ("command", "list") or any(
                c.type == "heredoc_redirect" for c in node.children
            ):
                return False
            stack.append(node.children[0])
        elif node.type != "command":
            return False
    return True


def literal_feed(command: SimpleCommand | None) -> str | None:
    """The text a bare `cat <<EOF` (or `cat <<< text`) passes down a pipe, else None."""
    if command is None or command.stdin not in ("heredoc", "herestring") or command.heredoc is None:
        return None
    plain = all(w.plain for w in command.words)
    argv = [w.text for w in command.words]
    files = [r for r in command.redirects if r.op != "<<<" and r.target is not None]
    if not plain or argv not in (["cat"], ["cat", "-"]) or files:
        return None  # `cat <<EOF > f | …` sends nothing down the pipe; anything else is not literal
    return command.heredoc


def node_text(node: ts.Node, source: bytes) -> str:
    """A node's text, sliced from the parsed bytes (a tree parsed from a reader has no copy of them)."""
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def expanded_names(node: ts.Node, source: bytes) -> Iterator[str]:
    """Names of the variables expanded anywhere inside a node (an unquoted here-document body)."""
    for child in node.children:
        if child.type in ("simple_expansion", "expansion"):
            name = next(
                (c for c in child.children if c.type in ("variable_name", "special_variable_name")), None
            )
            if name is not None and name.end_byte > name.start_byte:
                yield node_text(name, source)
        elif child.child_count and child.type not in ("command_substitution", "process_substitution"):
            yield from expanded_names(child, source)


def loop_word(word: Word) -> bool:
    """A loop word whose every value is known in shape: plain text or glob, or a workspace listing."""
    if word.listing:
        return True
    return word.plain and UNKNOWN not in word.text and "{" not in word.text and word.text != ""
