"""Read pulldown-cmark's event stream (pyromark) into mrkdwn lines.

The parser is compiled and flat: it hands over start/end events, not a tree, so 64 KB of nested
quotes or emphasis costs a list of events and a stack here, never recursion. `Writer` keeps one
frame per open container (quote, list item) to prefix each line it emits, and escapes every
piece of text, so model output cannot mention anyone or forge a link.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pyromark.event import Event

from bot.render.escape import escape
from bot.render.links import link

FENCE = "```"
RULE = "──────────"
_MARKS = {"Strong": "*", "Emphasis": "_", "Strikethrough": "~"}
_BLOCKS = frozenset({"Paragraph", "Heading", "CodeBlock", "Table", "List", "BlockQuote", "HtmlBlock", "Rule"})


@dataclass(slots=True)
class _Frame:
    """An open container: what each of its lines starts with, and what it last held."""

    kind: str  # "root", "quote" or "item"
    marker: str = ""  # an item's bullet or number, shown on its first line only
    last_block: str | None = None


@dataclass(slots=True)
class _List:
    number: int | None  # the next item's number; None for a bullet list


@dataclass(slots=True)
class Writer:
    """The mrkdwn of one document, fed one event at a time (see `feed`)."""

    lines: list[str] = field(default_factory=list)
    _frames: list[_Frame] = field(default_factory=lambda: [_Frame("root")])
    _lists: list[_List] = field(default_factory=list)
    _line: list[str] | None = None  # the pieces of the line being written, prefix first
    _heading: int | None = None  # where the open heading's text starts in `_line`
    # Where text goes unformatted while a code block, HTML block, table cell or link is open: the
    # same list as `_code`, `_html`, `_cell` or `_label` (never two at once, see `_open_label`).
    _raw: list[str] | None = None
    _code: list[str] | None = None
    _html: list[str] | None = None
    _table: list[list[str]] | None = None
    _cell: list[str] | None = None
    _label: list[str] | None = None  # the text of the outermost open link or image
    _target: tuple[str, str] = ("", "")  # its kind ("Link"/"Image") and destination
    _nested_labels: int = 0  # links and images open inside it: their text joins its label

    def feed_all(self, events: Iterable[Event]) -> None:
        """Take a document's events; text and emphasis, most of any answer, take the short way."""
        for event in events:
            if isinstance(event, str):
                self._bare(event)
                continue
            ((key, value),) = event.items()
            if type(value) is str:
                if key == "Text":
                    if self._raw is not None:
                        self._raw.append(value)
                    elif self._line is not None and "\n" not in value:
                        self._line.append(escape(value))
                    else:
                        self._text(value)
                    continue
                if value in _MARKS:  # the start or end of emphasis: a heading is bold already
                    if self._raw is None and self._heading is None:
                        self._write(_MARKS[value])
                    continue
            self._feed(key, value)

    def _feed(self, key: str, value: object) -> None:
        if key == "Start":
            name, data = _tag(value)
            self._start(name, data)
        elif key == "End":
            self._end(_tag(value)[0])
        elif key == "Code":
            self._code_span(str(value))
        else:  # Text, Html, InlineHtml and anything else that carries text: shown as text
            self._text(str(value))

    def finish(self) -> str:
        self._close_line()
        return "\n".join(self.lines)

    # Lines and their prefixes.

    def _prefix(self, *, blank: bool = False) -> str:
        parts = []
        for frame in self._frames:
            if frame.kind == "quote":
                parts.append(">")
            elif frame.kind == "item":
                parts.append(frame.marker if frame.marker and not blank else "  ")
                if not blank:
                    frame.marker = ""
        return "".join(parts)

    def _write(self, piece: str) -> None:
        if self._line is None:
            self._line = [self._prefix()]
        self._line.append(piece)

    def _close_line(self) -> None:
        if self._line is not None:
            self.lines.append("".join(self._line))
            self._line = None

    def _emit(self, text: str) -> None:
        """A whole line of already escaped text under the current containers."""
        self._close_line()
        self.lines.append(self._prefix() + text)

    def _begin_block(self, kind: str) -> None:
        """Separate a block from the one before it in the same container by one blank line."""
        self._close_line()
        frame = self._frames[-1]
        if frame.last_block is not None and not (frame.last_block == kind == "List"):
            self.lines.append(self._prefix(blank=True).rstrip())
        frame.last_block = kind

    # Events.

    def _bare(self, event: str) -> None:
        if event in ("SoftBreak", "HardBreak"):
            if self._raw is not None:
                self._raw.append(" ")
            else:
                self._close_line()
        elif event == "Rule":
            self._begin_block("Rule")
            self._emit(RULE)

    def _start(self, name: str, data: object) -> None:
        if name in _BLOCKS:
            self._begin_block(name)
        if name == "Heading":
            self._write("")
            assert self._line is not None
            self._heading = len(self._line)
        elif name == "BlockQuote":
            self._frames.append(_Frame("quote"))
        elif name == "List":
            self._lists.append(_List(data if isinstance(data, int) else None))
        elif name == "Item":
            self._item()
        elif name == "CodeBlock":
            self._code = self._raw = []
        elif name == "HtmlBlock":
            self._html = self._raw = []
        elif name == "Table":
            self._table = []
        elif name in ("TableHead", "TableRow") and self._table is not None:
            self._table.append([])
        elif name == "TableCell":
            self._cell = self._raw = []
        elif name in ("Link", "Image"):
            self._open_label(name, data)

    def _end(self, name: str) -> None:
        if name == "Heading":
            self._end_heading()
        elif name == "Paragraph":
            self._close_line()
        elif name == "BlockQuote":
            self._close_line()
            self._frames.pop()
        elif name == "List":
            self._close_line()
            self._lists.pop()
        elif name == "Item":
            self._end_item()
        elif name == "CodeBlock":
            self._end_code()
        elif name == "HtmlBlock":
            self._end_html()
        elif name == "TableCell":
            self._end_cell()
        elif name == "Table":
            self._end_table()
        elif name in ("Link", "Image"):
            self._close_label()

    def _text(self, text: str) -> None:
        if self._raw is not None:
            self._raw.append(text)
        else:
            first, *rest = text.split("\n")
            self._write(escape(first))
            for line in rest:  # inline HTML may span lines
                self._close_line()
                self._write(escape(line))

    def _code_span(self, text: str) -> None:
        if self._raw is not None:
            self._raw.append(text)
        else:
            self._write("`" + escape(text.replace("`", "ˋ")) + "`")

    # Containers and leaf blocks.

    def _item(self) -> None:
        self._close_line()
        numbering = self._lists[-1] if self._lists else _List(None)
        if numbering.number is None:
            marker = "• "
        else:
            marker = f"{numbering.number}. "
            numbering.number += 1
        self._frames.append(_Frame("item", marker))

    def _end_item(self) -> None:
        self._close_line()
        frame = self._frames.pop()
        if frame.marker:  # an empty item still shows its bullet
            self._frames.append(frame)
            self.lines.append(self._prefix().rstrip())
            self._frames.pop()

    def _end_heading(self) -> None:
        start, self._heading = self._heading, None
        if self._line is None or start is None:
            return
        title = "".join(self._line[start:]).strip().strip("*")
        self._line[start:] = [f"*{title}*"] if title else []
        self._close_line()

    def _end_code(self) -> None:
        text, self._code, self._raw = "".join(self._code or []), None, None
        self._emit(FENCE)  # the language tag would show as text in Slack
        for line in text.removesuffix("\n").split("\n") if text else []:
            self._emit(escape(line))
        self._emit(FENCE)

    def _end_html(self) -> None:
        text, self._html, self._raw = "".join(self._html or []), None, None
        for line in text.removesuffix("\n").split("\n"):
            self._emit(escape(line))

    def _end_cell(self) -> None:
        cell, self._cell, self._raw = self._cell, None, None
        if self._table and cell is not None:
            self._table[-1].append("".join(cell).strip())

    def _end_table(self) -> None:
        rows, self._table = self._table or [], None
        for line in table_lines(rows):
            self._emit(line)

    # Links and images: their text is read whole, then `link` decides what becomes clickable.

    def _open_label(self, name: str, data: object) -> None:
        if self._raw is not None:  # inside a link, an image or a table cell: text only
            self._nested_labels += 1
            return
        url = ""
        if isinstance(data, dict):
            url = str(data.get("dest_url") or "")
            if data.get("link_type") == "Email":
                url = "mailto:" + url
        self._label = self._raw = []
        self._target = (name, url)

    def _close_label(self) -> None:
        if self._nested_labels:
            self._nested_labels -= 1
            return
        if self._label is None:
            return
        label, self._label, self._raw = "".join(self._label), None, None
        kind, url = self._target
        self._write("!" + link(label or "image", url) if kind == "Image" else link(label, url))


def _tag(tag: object) -> tuple[str, object]:
    """A start or end tag as its name and data: `"Paragraph"` or `{"List": 1}`."""
    if type(tag) is str:
        return tag, None
    if isinstance(tag, dict):
        ((key, value),) = tag.items()
        return str(key), value
    return "", None


def table_lines(rows: list[list[str]]) -> list[str]:
    """A table's rows (the header first) as an aligned code block: Slack has no tables."""
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    sizes = [max(len(r[c]) for r in rows) for c in range(width)]
    text = [" | ".join(cell.ljust(sizes[c]) for c, cell in enumerate(row)).rstrip() for row in rows]
    text.insert(1, "-+-".join("-" * s for s in sizes))
    return [FENCE, *(escape(t) for t in text), FENCE]
