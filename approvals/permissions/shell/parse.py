"""Shell text to simple commands, with a real bash grammar (tree-sitter-bash).

The parse is conservative: every simple command anywhere in the text (lists, pipelines, subshells,
brace groups, conditions, loop bodies, function bodies, `$(…)`, backticks, process substitutions,
here-doc bodies) is returned for judging, and anything the walker does not understand is recorded
as a *problem*, which the engine turns into at least an ask.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from dataclasses import dataclass, field, replace

import tree_sitter as ts
import tree_sitter_bash

from approvals.permissions.budget import TooComplex, check_deadline
from approvals.permissions.shell.listings import lists_workspace_paths_piped, prints_revision
from approvals.permissions.shell.script import (
    Redirect,
    Script,
    SimpleCommand,
    Stdin,
    and_chain,
    expanded_names,
    literal_feed,
    loop_word,
    node_text,
)
from approvals.permissions.shell.words import MAX_WORD_PARTS, Word, WordReader

__all__ = ["MAX_SHELL_CHARS", "Redirect", "Script", "SimpleCommand", "Stdin", "parse_shell"]

MAX_SHELL_CHARS = 16 * 1024
# Caps that keep one judgment small whatever the text: statement nesting, simple commands.
MAX_NESTING = 64
MAX_COMMANDS = 500
MAX_WORDS = 1_000
# A `for` loop over at most this many plain words has its body judged once per word.
MAX_LOOP_WORDS = 8
# Nested loops multiply passes: past this many body walks per text, loop variables are unknown.
MAX_LOOP_PASSES = 32
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
# A cheap count before the grammar (a 16 KiB `cat | cat …` took 18 ms to parse only to be refused):
# quoted spans, comments and here-documents set aside, twice a cap in words, operators or parts of
# one word is refused without parsing. Twice, so only text far past the parser's own caps is.
_LEXICAL_FROM = 2048
# Each alternative consumes what it starts (an unclosed quote runs to the end): one linear pass.
# (A closing quote required after `"\"\"\"…` made every quote a new start: 2 s at 16 KiB.)
_QUOTED = re.compile(r"""'[^']*'?|"(?:[^"\\]|\\.)*"?|(?:^|(?<=\s))#[^\n]*""")
_OPERATOR_RUN = re.compile(r"[;&|\n]+|\$\(|`")
_PART_CHARS = re.compile(r"""[$'"`{]""")
_STATEMENT_TYPES = frozenset(
    {
        "program", "list", "pipeline", "command", "redirected_statement", "subshell",
        "compound_statement", "function_definition", "negated_command", "if_statement",
        "elif_clause", "else_clause", "while_statement", "for_statement", "c_style_for_statement",
        "do_group", "case_statement", "case_item", "declaration_command", "unset_command",
        "variable_assignment", "variable_assignments", "test_command", "comment",
    }
)  # fmt: skip
# Node types inside a statement that carry no commands of their own but may hold substitutions.
_INERT_TYPES = frozenset(
    {
        "word", "number", "string", "raw_string", "ansi_c_string", "concatenation", "simple_expansion",
        "expansion", "arithmetic_expansion", "variable_name", "test_operator", "unary_expression",
        "binary_expression", "parenthesized_expression", "postfix_expression", "ternary_expression",
        "regex", "extglob_pattern", "brace_expression", "translated_string", "special_variable_name",
        "string_content", "file_descriptor",
    }
)  # fmt: skip


# CPU seconds of the judging thread one parse may take. tree-sitter's error recovery is super-linear
# on some malformed text (16 KiB of `x=(` took 2-3 s); no honest command comes near this.
PARSE_BUDGET_S = 0.025
_LANGUAGE = ts.Language(tree_sitter_bash.language())
# One parser per thread: a tree-sitter parser is not safe to share, and a shared one behind a lock
# would make every agent's judgment wait on the slowest (the engine judges in worker threads).
_PARSERS = threading.local()


class _ParseTooSlow(Exception):
    """The parse ran past `PARSE_BUDGET_S`."""


def _parser() -> ts.Parser:
    parser: ts.Parser | None = getattr(_PARSERS, "parser", None)
    if parser is None:
        parser = ts.Parser(_LANGUAGE)
        _PARSERS.parser = parser
    return parser


def _parse(source: bytes) -> ts.Tree:
    """Parse `source` with this thread's parser, stopped past the parse budget (`_ParseTooSlow`).

    A parse that runs out gets one second try: a pause that was not the parse's (a collector cycle,
    CPU time a busy host accounts to the thread) does not recur; a super-linear parse runs out again.
    """

    def read(offset: int, _point: object) -> bytes:
        return source[offset : offset + 1024]

    parser = _parser()
    for _ in range(2):
        stop = time.thread_time() + PARSE_BUDGET_S
        try:
            return parser.parse(read, progress_callback=lambda *_state, stop=stop: time.thread_time() > stop)
        except ValueError:
            parser.reset()
    raise _ParseTooSlow


@functools.lru_cache(maxsize=8192)
def parse_shell(text: str) -> Script:
    """Parse shell text into simple commands; never raises on bad input (problems say why)."""
    if len(text) > MAX_SHELL_CHARS:
        why = f"too long to judge ({len(text)} chars > {MAX_SHELL_CHARS})"
        return Script(commands=(), problems=(why,), refused=why)
    if "\x00" in text:
        return Script(commands=(), problems=("command contains a NUL byte",), refused="contains a NUL byte")
    bulk = _lexically_too_complex(text)
    if bulk is not None:
        return Script(
            commands=(), problems=(bulk,), parse_error=True, refused=f"too complex to judge: {bulk}"
        )
    problems: list[str] = []
    if _ASTRAL.search(text):
        # tree-sitter-bash 0.25 can crash the process on some characters beyond U+FFFF (found by
        # fuzzing); no shell syntax needs them, so they become U+FFFD and the command is asked.
        text = _ASTRAL.sub("\ufffd", text)
        problems.append("characters outside the Basic Multilingual Plane")
    source = text.encode("utf-8", "surrogatepass")
    try:
        tree = _parse(source)
        if tree.root_node.has_error and "((" in text:
            # bash reads an unbalanced `((` as two subshells; so do we, when that parses cleanly.
            spaced = re.sub(r"(?<!\$)\(\(", "( (", text).encode("utf-8", "surrogatepass")
            retry = _parse(spaced)
            if not retry.root_node.has_error:
                tree, source = retry, spaced
    except _ParseTooSlow:
        why = "the shell grammar could not parse it within its budget"
        return Script(commands=(), problems=(why,), parse_error=True, refused=f"too complex to judge: {why}")
    walker = _Walker(problems=problems, source=source)
    try:
        walker.statement(tree.root_node)
    except (RecursionError, _TooComplex) as exc:
        # Hundreds of nested `(`/`$(`/`{` or thousands of commands: no honest command needs it.
        why = str(exc) if isinstance(exc, _TooComplex) else f"nested deeper than {MAX_NESTING} levels"
        return Script(commands=(), problems=(why,), parse_error=True, refused=f"too complex to judge: {why}")
    if tree.root_node.has_error:
        walker.problems.append("the shell text does not parse cleanly")
    return Script(
        commands=tuple(walker.commands),
        problems=tuple(dict.fromkeys(walker.problems)),
        fork_bomb=walker.fork_bomb,
        local_names=frozenset(walker.locals),
        parse_error=tree.root_node.has_error,
        and_chain=not tree.root_node.has_error and and_chain(tree.root_node),
        evaluated=walker.evaluated(),
    )


_TooComplex = TooComplex


def _lexically_too_complex(text: str) -> str | None:
    """Why long text is refused before parsing (far past a cap by a count without grammar), or None."""
    if len(text) < _LEXICAL_FROM or "<<" in text:
        return None
    bare = _QUOTED.sub("'", text)
    tokens = bare.split()
    if len(tokens) > 2 * MAX_WORDS:
        return f"more than {MAX_WORDS} words"
    if len(_OPERATOR_RUN.findall(bare)) > 2 * MAX_COMMANDS:
        return f"more than {MAX_COMMANDS} commands"
    if any(len(t) > 512 and len(_PART_CHARS.findall(t)) > 2 * MAX_WORD_PARTS for t in tokens):
        return f"a word of more than {MAX_WORD_PARTS} parts"
    return None


@dataclass
class _Walker:
    commands: list[SimpleCommand] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    locals: set[str] = field(default_factory=set)
    fork_bomb: bool = False
    _functions: list[str] = field(default_factory=list)
    _loop_passes: int = 0
    source: bytes = b""
    # Assignments seen so far (standalone and exported), in document order.
    environment: list[tuple[str, Word]] = field(default_factory=list)
    _depth: int = 0
    _words: int = 0

    def __post_init__(self) -> None:
        self.words = WordReader(
            on_substitution=self.statement,
            on_problem=self.problems.append,
            source=self.source,
            is_listing=lists_workspace_paths_piped,
            is_revision=prints_revision,
        )

    def evaluated(self) -> tuple[str, ...]:
        """Stored values that bash evaluates as code (arithmetic, `${x@P}`, `${!x}`) and that hold code."""
        texts: list[str] = []
        for name in dict.fromkeys(self.words.evaluated_names):
            for bound, word in self.environment:
                if bound == name and any(m in word.text for m in ("$(", "`", "<(", ">(", "[")):
                    texts.append(word.text)
        return tuple(dict.fromkeys(texts))

    def statement(self, node: ts.Node) -> None:
        """Walk any node that may contain commands (depth-capped: see MAX_NESTING)."""
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise _TooComplex(f"nested deeper than {MAX_NESTING} levels")
            check_deadline()
            self._statement(node)
        finally:
            self._depth -= 1

    def _statement(self, node: ts.Node) -> None:
        kind = node.type
        if node.is_error or node.is_missing:
            self.problems.append("the shell text does not parse cleanly")
        if kind == "command":
            self._command(node, (), "inherit", None, ())
        elif kind == "redirected_statement":
            self._redirected(node)
        elif kind == "pipeline":
            self._pipeline(node)
        elif kind == "function_definition":
            self._function(node)
        elif kind == "for_statement":
            self._for(node)
        elif kind == "variable_assignment":
            self._assignment(node)
        elif kind in ("declaration_command", "unset_command"):
            self._declaration(node)
        elif kind == "compound_statement" and node.child_count and node.children[0].type == "((":
            self._inert(node)
        elif kind in _STATEMENT_TYPES or kind == "ERROR":
            for child in node.children:
                self._child(child)
        elif kind in _INERT_TYPES or kind.startswith(("heredoc_", "$(", "`")):
            self._inert(node)
        elif node.is_named:
            self.problems.append(f"unsupported shell construct: {kind}")
            for child in node.children:
                self._child(child)

    def _child(self, child: ts.Node) -> None:
        if child.is_named or child.is_error or child.is_missing:
            self.statement(child)
        elif child.type in ("|&", "coproc", "select"):
            self.problems.append(f"unsupported shell construct: {child.type}")

    def _inert(self, node: ts.Node) -> None:
        """Look inside words and expressions only for substitutions (they run)."""
        for child in node.children:
            if child.type in ("command_substitution", "process_substitution"):
                self.words.read(child)
            elif child.child_count:
                self._inert(child)

    def _command(
        self, node: ts.Node, extra: tuple[Redirect, ...], stdin: Stdin, heredoc: str | None,
        upstream: tuple[str, ...], heredoc_variables: tuple[str, ...] = (), after: tuple[Word, ...] = (),
    ) -> SimpleCommand:  # fmt: skip
        words: list[Word] = []
        redirects: list[Redirect] = list(extra)
        group: list[ts.Node] = []
        prefix: list[tuple[str, Word]] = []
        for child in node.children:
            if child.type == "variable_assignment":
                assigned = self._assignment(child, standalone=False)
                if assigned is not None:
                    prefix.append(assigned)
            elif child.type in ("file_redirect", "herestring_redirect"):
                hung: list[Word] = []
                redirects.append(self._redirect(child, hung))
                if hung:
                    if group:
                        words.append(self.words.read_group(group))
                        group = []
                    words.extend(hung)
            elif child.type == "command_name" or child.is_named or child.type == "$":
                node_ = child.children[0] if child.type == "command_name" and child.child_count else child
                if group and not self._continues(group[-1].end_byte, node_.start_byte):
                    words.append(self.words.read_group(group))
                    group = []
                    if len(words) + self._words > MAX_WORDS:
                        raise _TooComplex(f"more than {MAX_WORDS} words")
                group.append(node_)
        if group:
            words.append(self.words.read_group(group))
        words.extend(after)
        if len(self.commands) >= MAX_COMMANDS:
            raise _TooComplex(f"more than {MAX_COMMANDS} commands")
        self._words += len(words)
        if self._words > MAX_WORDS:
            raise _TooComplex(f"more than {MAX_WORDS} words")
        herestrings = [r.text for r in redirects if r.op == "<<<"]
        if herestrings:
            stdin, heredoc = "herestring", herestrings[-1]
        elif stdin == "inherit" and any(r.reads for r in redirects):
            stdin = "file"
        command = SimpleCommand(
            tuple(words), tuple(redirects), stdin, heredoc, upstream, heredoc_variables,
            tuple(self.environment) + tuple(prefix), tuple(prefix),
        )  # fmt: skip
        self.commands.append(command)
        return command

    def _continues(self, end: int, start: int) -> bool:
        r"""Two nodes are one word when nothing, or only backslash-newlines, separate them (`r\⏎m`)."""
        gap = self.source[end:start]
        return not gap or (not gap.replace(b"\\\n", b"") and len(gap) <= 4096)

    def _redirect(self, node: ts.Node, after: list[Word]) -> Redirect:
        """The redirect; words the grammar hangs on it after its target are appended to `after`.

        tree-sitter-bash reads `echo x > /etc/passwd foo` as a redirect of `/etc/passwd foo`: the
        target is the first word, and `foo` is one more argument of the command (bash's reading).
        """
        op = ""
        target: Word | None = None
        for child in node.children:
            if child.type == "file_descriptor":
                continue
            if not child.is_named:
                op += child.type
            elif target is None:
                target = self.words.read(child)
            else:
                after.append(self.words.read(child))
        if node.type == "herestring_redirect":
            return Redirect("<<<", None, target.text if target is not None else "")
        # `>&2`, `2>&1`, `<&0`: descriptor duplication, not a file.
        if target is not None and op in (">&", "<&") and (target.text.isdigit() or target.text == "-"):
            return Redirect(op, None)
        return Redirect(op, target)

    def _redirected(self, node: ts.Node) -> None:
        redirects: list[Redirect] = []
        heredoc: str | None = None
        variables: list[str] = []
        tail: list[ts.Node] = []
        hung: list[Word] = []
        body: ts.Node | None = None
        for child in node.children:
            if child.type in ("file_redirect", "herestring_redirect"):
                redirects.append(self._redirect(child, hung))
            elif child.type == "heredoc_redirect":
                for part in child.children:
                    if part.type == "heredoc_body":
                        heredoc = node_text(part, self.source)
                        variables.extend(expanded_names(part, self.source))
                        self._inert(part)
                    elif part.type == "file_redirect":
                        redirects.append(self._redirect(part, hung))
                    elif part.is_named and part.type not in ("heredoc_start", "heredoc_end"):
                        tail.append(part)
            elif child.is_named and body is None:
                body = child
            elif child.is_named:
                self.statement(child)
        first = self._redirect_target(body, tuple(redirects), heredoc, tuple(variables), tuple(hung))
        if first is None and heredoc is not None and tail:
            # Where the here-document goes is unclear, so what the next stage reads is too.
            self.problems.append("a here-document the parser could not attach to one command")
        for part in tail:
            if part.type == "pipeline":
                self._pipeline(part, first)
            else:
                self.statement(part)

    def _redirect_target(
        self, body: ts.Node | None, redirects: tuple[Redirect, ...], heredoc: str | None,
        variables: tuple[str, ...], after: tuple[Word, ...] = (),
    ) -> SimpleCommand | None:  # fmt: skip
        """Walk the redirected statement; the command that receives the redirects (None: a no-op)."""
        if body is not None and body.type == "command":
            stdin: Stdin = "heredoc" if heredoc is not None else "inherit"
            return self._command(body, redirects, stdin, heredoc, (), variables, after)
        if body is not None and body.type == "list" and body.named_children:
            # `a && cat <<EOF | bash`, `a && b > f`: the grammar hangs the redirect on the whole
            # list, but bash gives it to the last command, the one written before it.
            *init, final = body.named_children
            for child in init:
                self.statement(child)
            return self._redirect_target(final, redirects, heredoc, variables, after)
        if body is not None and body.type == "pipeline" and body.named_children[-1].type == "command":
            # `a | b > f`, `a | cat <<EOF`: the redirects belong to the last stage.
            self._pipeline(body)
            last = self.commands[-1]
            last_stdin: Stdin = "file" if any(r.reads for r in redirects) else last.stdin
            if heredoc is not None:
                last_stdin = "heredoc"
            self.commands[-1] = replace(
                last, words=last.words + after, redirects=last.redirects + redirects, stdin=last_stdin,
                heredoc=heredoc if heredoc is not None else last.heredoc,
                heredoc_variables=last.heredoc_variables + variables,
            )  # fmt: skip
            return self.commands[-1]
        # A compound statement with a redirect (or a bare `> file`): its own commands, plus the
        # redirect as an access of a no-op command.
        if body is not None:
            self.statement(body)
        self.commands.append(SimpleCommand((Word(text=":"), *after), redirects))
        return None

    def _pipeline(self, node: ts.Node, upstream_command: SimpleCommand | None = None) -> None:
        previous = upstream_command
        for child in node.children:
            if not child.is_named:
                if child.type == "|&":
                    self.problems.append("unsupported shell construct: |&")
                continue
            upstream = tuple(w.text for w in previous.words) if previous is not None else ()
            stdin: Stdin = "pipe" if previous is not None else "inherit"
            feed = literal_feed(previous)
            if child.type == "command" and feed is not None:
                # `cat <<EOF | python3`: the code is right there, exactly as in `python3 <<EOF`.
                previous = self._command(child, (), "heredoc", feed, upstream)
            elif child.type == "command":
                previous = self._command(child, (), stdin, None, upstream)
            else:
                before = len(self.commands)
                self.statement(child)
                if previous is not None and len(self.commands) > before:
                    # Feed the pipe into the first command of a group, e.g. `x | { sh; }`.
                    first = self.commands[before]
                    self.commands[before] = SimpleCommand(
                        first.words, first.redirects, "pipe", first.heredoc, upstream
                    )
                previous = self.commands[-1] if len(self.commands) > before else None

    def _function(self, node: ts.Node) -> None:
        name_node = node.child_by_field_name("name") or node.children[0]
        name = node_text(name_node, self.source)
        self.problems.append(f"defines a shell function ({name})")
        before = len(self.commands)
        for child in node.children[1:]:
            self._child(child)
        body_text = node_text(node, self.source)
        calls_itself = any(c.words and c.words[0].text == name for c in self.commands[before:])
        if calls_itself and ("&" in body_text or "|" in body_text):
            self.fork_bomb = True

    def _assignment(self, node: ts.Node, *, standalone: bool = True) -> tuple[str, Word] | None:
        """Record `x=value` (and loop variables); a value is trusted only if set once, plainly."""
        name: str | None = None
        value: Word | None = None
        for child in node.children:
            if child.type == "variable_name" and child.end_byte > child.start_byte and name is None:
                name = node_text(child, self.source)
                self.locals.add(name)
            elif child.type in ("do_group", "compound_statement"):
                self.statement(child)
            elif child.is_named:
                value = self.words.read(child)
        if name is None:
            return None
        self._words += 1
        if self._words > MAX_WORDS:
            raise _TooComplex(f"more than {MAX_WORDS} words")
        if standalone and value is not None:
            self.environment.append((name, value))
        bindings = self.words.bindings
        once = name not in bindings and standalone and node.type == "variable_assignment"
        plain_value = value is not None and value.plain and "+=" not in node_text(node, self.source)
        if once and plain_value and value is not None:
            bindings[name] = value.text  # a leading ~ stays ~: the path layer reads it as home
        else:
            bindings[name] = None
        return (name, value) if value is not None else None

    def _for(self, node: ts.Node) -> None:
        """`for f in a *.py $(git ls-files); do …; done`: the body once per word, `$f` bound to it.

        A glob word stands for every file it matches, a listing for every listed name; any other
        word (a variable, an arbitrary substitution, braces) leaves `$f` unknown, as before.
        """
        name_node = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        if name_node is None or body is None or node.children[0].type != "for":
            self._assignment(node)
            return
        name = node_text(name_node, self.source)
        self.locals.add(name)
        values = [
            self.words.read(c) for i, c in enumerate(node.children) if node.field_name_for_child(i) == "value"
        ]
        known = (
            0 < len(values) <= MAX_LOOP_WORDS
            and self._loop_passes + len(values) <= MAX_LOOP_PASSES
            and name not in self.words.loop_values
            and all(loop_word(w) for w in values)
        )
        if not known:
            self.words.bindings[name] = None
            self.statement(body)
            return
        self._loop_passes += len(values)
        for value in values:
            # Each pass assigns the variable afresh (whatever earlier text or passes set).
            self.words.bindings.pop(name, None)
            self.words.loop_values[name] = value
            self.statement(body)
        del self.words.loop_values[name]
        self.words.bindings[name] = None  # after the loop: whatever the last pass left

    def _declaration(self, node: ts.Node) -> None:
        """`export A=1`, `declare -p`, `unset X`: judged as a command named by the keyword."""
        words = [Word(text=node.children[0].type)]
        for child in node.children[1:]:
            if child.type == "variable_assignment":
                self._assignment(child)
                name = node_text(child.children[0], self.source)
                words.append(Word(text=name + "=…"))
            elif child.is_named:
                words.append(self.words.read(child))
        self.commands.append(SimpleCommand(tuple(words)))
