"""Markdown (what models write) to Slack mrkdwn (what messages show), and splitting long text.

Slack's mrkdwn is not Markdown: `*bold*`, `_italic_`, `~strike~`, `<url|label>` links, no headings
and no tables (docs.slack.dev/messaging/formatting-message-text). The conversion escapes every
piece of text it emits, so model output cannot mention anyone or forge links; code is kept
verbatim (escaped only), tables become code blocks so their columns stay aligned.

Parsing is pulldown-cmark's (pyromark, compiled), linear, and 64 KB of the worst shapes found
convert in under 50 ms, where markdown-it-py, pure Python, took a second (issue 20). What is left
is the walk over its events here, about a microsecond each.
"""

from __future__ import annotations

import re

import pyromark

from bot.render.escape import escape
from bot.render.markdown import FENCE, OverBudget, Writer

__all__ = ["FENCE", "markdown_to_mrkdwn", "split_message"]

_OPTIONS = pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH
# Quotes and list items nested deeper than this on one line are shown as their literal markers:
# no one reads the 9th level, and "> " * 32768 would otherwise be 65,000 events to walk.
MAX_NESTING = 8
# A line that starts with a long run of marker characters (one character class: a fast scan, where
# a counted group costs a step per repetition); `_flatten` then reads the markers one by one.
_MARKER_RUN = re.compile(rf"^[ \t]*[>*+\-\d.)][ \t>*+\-\d.)]{{{MAX_NESTING},}}", re.MULTILINE)
# One container marker and the blanks after it; the group that matched holds its punctuation.
_MARKER = re.compile(r"(?:(>)|([-*+])(?=[ \t])|\d{1,9}([.)])(?=[ \t]))[ \t]*")


def _flatten(run: re.Match[str]) -> str:
    """Escape a line's first container marker past MAX_NESTING: the rest of the line is then text."""
    text, end = run.string, run.end()
    pos = end - len(run.group(0).lstrip(" \t"))
    for _ in range(MAX_NESTING):
        marker = _MARKER.match(text, pos, end)
        if marker is None:
            return run.group(0)
        pos = marker.end()
    marker = _MARKER.match(text, pos, end)
    if marker is None or marker.lastindex is None:
        return run.group(0)
    cut = marker.start(marker.lastindex)
    return text[run.start() : cut] + "\\" + text[cut:end]


def walk_budget(size: int) -> int:
    """What converting a text of `size` characters may cost (`Writer.budget`) before it is text.

    Prose spends a unit every 5-10 characters and a table of short cells one every 2; 64 KB of
    `"#\\n"`, `"|1|\\n|-|\\n\\n"` or `"*_"` several per character, up to 80 ms of walking. Past the
    budget the answer is shown as escaped text: no 64 KB input walks more than ~70,000 units (a
    whole final answer of 64 KB renders within about 31 ms, `bench_render`), and a document of a
    heading and a line per section still renders.
    """
    return 4096 + size


def markdown_to_mrkdwn(md: str) -> str:
    """Convert Markdown to escaped Slack mrkdwn (see the module docstring)."""
    md = md.replace("\r\n", "\n").replace("\x00", "")
    text = _MARKER_RUN.sub(_flatten, md)
    writer = Writer(walk_budget(len(text)))
    try:
        writer.feed_all(pyromark.events(text, options=_OPTIONS))
    except OverBudget:
        return escape(md)
    return writer.finish()


def _hard_wrap(line: str, width: int) -> list[str]:
    """Cut an over-long line, preferring spaces, never inside an `&…;` entity."""
    pieces = []
    while len(line) > width:
        cut = line.rfind(" ", width // 2, width)
        cut = width if cut == -1 else cut
        amp = line.rfind("&", max(cut - 6, 0), cut)
        if amp != -1 and ";" not in line[amp:cut]:
            cut = amp
        pieces.append(line[:cut])
        line = line[cut:].lstrip(" ") if line[cut : cut + 1] == " " else line[cut:]
    return [*pieces, line]


def split_message(text: str, limit: int = 3000) -> list[str]:
    """Split mrkdwn into chunks of at most `limit` chars, at line breaks where possible.

    A chunk that ends inside a code block closes it, and the next chunk reopens it, so every
    chunk renders on its own.
    """
    if limit < 16:
        raise ValueError("limit too small to hold a code fence")
    chunks: list[str] = []
    current: list[str] = []
    size = -1  # length of "\n".join(current)
    in_fence = False
    width = limit - 2 * len(FENCE) - 2
    for line in text.split("\n"):
        # Most lines are short and hold no fence: no wrap to try, no count to make.
        for piece in (line,) if len(line) <= width else _hard_wrap(line, width):
            toggles = FENCE in piece and piece.count(FENCE) % 2 == 1
            closing = len(FENCE) + 1 if in_fence != toggles else 0  # room to close a fence left open
            if current and size + len(piece) + 1 + closing > limit:
                chunks.append("\n".join([*current, FENCE] if in_fence else current))
                current, size = ([FENCE], len(FENCE)) if in_fence else ([], -1)
            current.append(piece)
            size += len(piece) + 1
            if toggles:
                in_fence = not in_fence
    if current and any(part.strip() for part in current):
        chunks.append("\n".join([*current, FENCE] if in_fence else current))
    return [c for c in chunks if c.strip() and c.strip() != f"{FENCE}\n{FENCE}"] or [""]
