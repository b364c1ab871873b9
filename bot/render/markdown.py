"""Read pulldown-cmark's event stream (pyromark) into mrkdwn lines.

The parser is compiled and flat: it hands over start/end events, not a tree, so 64 KB of nested
quotes or emphasis costs a list of events and a stack here, never recursion. `Writer` keeps one
frame per open container (quote, list item) to prefix each line it emits, and escapes every
piece of text, so model output cannot mention anyone or forge a link. Each event and each costly
construct spends from a budget the caller sizes, so no text walks for long (`OverBudget`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pyromark.event import Event

from bot.render.escape import escape
from bot.render.links import link

FENCE = "```"
RULE = "──────────"
_MARKS = {"Strong": "*", "Emphasis": "_", "Strikethrough": "~"}


class OverBudget(Exception):
    """The text costs more to walk than its size allows (see `Writer.budget`)."""


@dataclass(slots=True)
class _Frame:
    """An open container (the document, a quote, a list item) and how its lines start."""

    prefix: str  # what each line inside it starts with: ">" per quote, two spaces per item
    marker: str = ""  # an item's bullet or number, not yet shown: its first line shows it
    last_block: str | None = None  # the kind of the block it last held, for the blank between


@dataclass(slots=True)
class Writer:
    """The mrkdwn of one document, fed its events (see `feed_all`)."""

    # What the walk may still spend, in events (about half a microsecond each) and the extra work
    # of blocks, links and tables: past it, `OverBudget` stops the walk (see `markdown_to_mrkdwn`).
    budget: int
    lines: list[str] = field(default_factory=list)
    _frames: list[_Frame] = field(default_factory=lambda: [_Frame("")])
    _pending: int = 0  # how many open items have not shown their marker yet
    _numbers: list[int | None] = field(default_factory=list)  # each open list's next number
    _line: list[str] | None = None  # the pieces of the line being written, prefix first
    _heading: int | None = None  # where the open heading's text starts in `_line`
    # Where text goes unformatted while a code block, HTML block, table cell or link is open
    # (never two at once: a link inside a cell or another link only counts in `_nested_labels`).
    _raw: list[str] | None = None
    _table: list[list[str]] | None = None
    _target: tuple[str, str] = ("", "")  # the open link's or image's kind and destination
    _nested_labels: int = 0  # links and images open inside it: their text joins its label

    def feed_all(self, events: Iterable[Event]) -> None:
        """Take a document's events; text and emphasis, most of any answer, take the short way."""
        for event in events:
            self.budget -= 1
            if self.budget < 0:
                raise OverBudget
            if isinstance(event, str):
                self._bare(event)
                continue
            ((key, value),) = event.items()
            if key == "Text" and type(value) is str:
                if self._raw is not None:
                    self._raw.append(value)
                elif "\n" in value:
                    self._text(value)
                elif self._line is None:
                    self._line = [self._prefix(), escape(value)]
                else:
                    self._line.append(escape(value))
            elif key == "Start" or key == "End":
                if type(value) is str:
                    name, data = value, None
                elif isinstance(value, dict):
                    ((name, data),) = value.items()
                else:
                    continue
                if name in _MARKS:  # emphasis inside a heading (bold already) or a label: dropped
                    if self._raw is None and self._heading is None:
                        self._write(_MARKS[name])
                else:
                    (_STARTS if key == "Start" else _ENDS).get(name, Writer._ignore)(self, data)
            elif key == "Code":
                self._code_span(str(value))
            else:  # Html, InlineHtml and anything else that carries text: shown as text
                self._text(str(value))

    def finish(self) -> str:
        self._close_line()
        return "\n".join(self.lines)

    # Lines and their prefixes.

    def _prefix(self) -> str:
        if not self._pending:
            return self._frames[-1].prefix
        top = self._frames[-1]
        if self._pending == 1 and top.marker:  # an item's first line, the usual case
            marker, top.marker, self._pending = top.marker, "", 0
            return self._frames[-2].prefix + marker
        parts, outer = [], ""
        for frame in self._frames:  # an item's first line: its marker where its indent would be
            own, outer = frame.prefix[len(outer) :], frame.prefix
            if frame.marker:
                own, frame.marker = frame.marker, ""
            parts.append(own)
        self._pending = 0
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
        self.budget -= 4
        frame = self._frames[-1]
        if frame.last_block is not None and not (frame.last_block == kind == "List"):
            self.lines.append(frame.prefix.rstrip())
        frame.last_block = kind

    # Events.

    def _ignore(self, data: object) -> None:
        """A tag with nothing to show of its own (a table head, a row): its content shows."""

    def _bare(self, event: str) -> None:
        if event in ("SoftBreak", "HardBreak"):
            if self._raw is not None:
                self._raw.append(" ")
            elif self._heading is not None:  # a setext heading's lines: one bold line
                self._write(" ")
            else:
                self._close_line()
        elif event == "Rule":
            self._begin_block("Rule")
            self._emit(RULE)

    def _text(self, text: str) -> None:
        if self._raw is not None:
            self._raw.append(text)
            return
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

    def _paragraph(self, data: object) -> None:
        self._begin_block("Paragraph")

    def _end_line(self, data: object) -> None:
        self._close_line()

    def _quote(self, data: object) -> None:
        self._begin_block("BlockQuote")
        self._frames.append(_Frame(self._frames[-1].prefix + ">"))

    def _end_quote(self, data: object) -> None:
        self._close_line()
        self._frames.pop()

    def _list(self, data: object) -> None:
        self._begin_block("List")
        self._numbers.append(data if isinstance(data, int) else None)

    def _end_list(self, data: object) -> None:
        self._close_line()
        self._numbers.pop()

    def _item(self, data: object) -> None:
        self._close_line()
        self.budget -= 2
        number = self._numbers[-1] if self._numbers else None
        if number is None:
            marker = "• "
        else:
            marker = f"{number}. "
            self._numbers[-1] = number + 1
        self._frames.append(_Frame(self._frames[-1].prefix + "  ", marker))
        self._pending += 1

    def _end_item(self, data: object) -> None:
        self._close_line()
        if self._frames[-1].marker:  # an empty item still shows its bullet
            self.lines.append(self._prefix().rstrip())
        self._frames.pop()

    def _heading_start(self, data: object) -> None:
        self._begin_block("Heading")
        self._write("")
        self._heading = len(self._line or ())

    def _end_heading(self, data: object) -> None:
        start, self._heading = self._heading, None
        if self._line is None or start is None:
            return
        title = "".join(self._line[start:]).strip().strip("*")
        self._line[start:] = [f"*{title}*"] if title else []
        self._close_line()

    def _code_block(self, data: object) -> None:
        self._begin_block("CodeBlock")
        self._raw = []

    def _end_code(self, data: object) -> None:
        text, self._raw = "".join(self._raw or ()), None
        self._emit(FENCE)  # the language tag would show as text in Slack
        for line in text.removesuffix("\n").split("\n") if text else []:
            self._emit(escape(line))
        self._emit(FENCE)

    def _html_block(self, data: object) -> None:
        self._begin_block("HtmlBlock")
        self._raw = []

    def _end_html(self, data: object) -> None:
        text, self._raw = "".join(self._raw or ()), None
        for line in text.removesuffix("\n").split("\n"):
            self._emit(escape(line))

    def _table_start(self, data: object) -> None:
        self._begin_block("Table")
        self._table = []

    def _row(self, data: object) -> None:
        if self._table is not None:
            self._table.append([])

    def _cell(self, data: object) -> None:
        self._raw = []

    def _end_cell(self, data: object) -> None:
        cell, self._raw = self._raw, None
        if self._table and cell is not None:
            self._table[-1].append("".join(cell).strip())

    def _end_table(self, data: object) -> None:
        rows, self._table = self._table or [], None
        self.budget -= 8 + sum(map(len, rows))
        for line in table_lines(rows):
            self._emit(line)

    # Links and images: their text is read whole, then `link` decides what becomes clickable.

    def _link(self, data: object) -> None:
        self._open_label("Link", data)

    def _image(self, data: object) -> None:
        self._open_label("Image", data)

    def _open_label(self, kind: str, data: object) -> None:
        if self._raw is not None:  # inside a link, an image or a table cell: text only
            self._nested_labels += 1
            return
        url = ""
        if isinstance(data, dict):
            url = str(data.get("dest_url") or "")
            if data.get("link_type") == "Email":
                url = "mailto:" + url
        self._raw, self._target = [], (kind, url)

    def _close_label(self, data: object) -> None:
        self.budget -= 4
        if self._nested_labels:
            self._nested_labels -= 1
            return
        if self._raw is None:
            return
        label, self._raw = "".join(self._raw), None
        kind, url = self._target
        self._write("!" + link(label or "image", url) if kind == "Image" else link(label, url))


_Handler = Callable[[Writer, object], None]
_STARTS: dict[str, _Handler] = {
    "Paragraph": Writer._paragraph,
    "Heading": Writer._heading_start,
    "BlockQuote": Writer._quote,
    "List": Writer._list,
    "Item": Writer._item,
    "CodeBlock": Writer._code_block,
    "HtmlBlock": Writer._html_block,
    "Table": Writer._table_start,
    "TableHead": Writer._row,
    "TableRow": Writer._row,
    "TableCell": Writer._cell,
    "Link": Writer._link,
    "Image": Writer._image,
}
_ENDS: dict[str, _Handler] = {
    "Paragraph": Writer._end_line,
    "Heading": Writer._end_heading,
    "BlockQuote": Writer._end_quote,
    "List": Writer._end_list,
    "Item": Writer._end_item,
    "CodeBlock": Writer._end_code,
    "HtmlBlock": Writer._end_html,
    "Table": Writer._end_table,
    "TableCell": Writer._end_cell,
    "Link": Writer._close_label,
    "Image": Writer._close_label,
}


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
