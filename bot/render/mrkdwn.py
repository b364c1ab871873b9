"""Markdown (what models write) to Slack mrkdwn (what messages show), and splitting long text.

Slack's mrkdwn is not Markdown: `*bold*`, `_italic_`, `~strike~`, `<url|label>` links, no headings
and no tables (docs.slack.dev/messaging/formatting-message-text). The conversion escapes every
piece of text it emits, so model output cannot mention anyone or forge links; code is kept
verbatim (escaped only), tables become code blocks so their columns stay aligned.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from bot.render.escape import escape

FENCE = "```"
_FENCE_LINE = re.compile(r"^\s*(```|~~~)")
# Each pattern has one way to match a line: the heading's `\s+(.*?)\s*#*\s*$` had three and took
# seconds on "# x" and a few KB of spaces (cubic); the closing #s are cut with `str` methods.
_HEADING = re.compile(r"\s{0,3}#{1,6}\s(.*)")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_ORDERED = re.compile(r"^(\s*)(\d{1,9})[.)]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_TABLE_SEP = re.compile(r"\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?")  # fullmatch on the stripped line
_SAFE_URL = re.compile(r"(?:https?://|mailto:)[^\s<>|]+", re.IGNORECASE)
# Inline rules only (blocks are read line by line below); HTML and entities stay text, escaped.
_MD = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").disable(["entity", "autolink"])
# Every link target is read; `_link` decides what becomes clickable (a `javascript:` one is shown
# as text beside its label, not dropped).
_MD.validateLink = lambda url: True  # type: ignore[method-assign]
_BOLD_MARK = "\x01"


def _host(url: str) -> str:
    """Where a link really goes: the host of a web link, the address of a mailto."""
    if url.lower().startswith("mailto:"):
        return url[len("mailto:") :]
    return (urlsplit(url).hostname or url).lower()


def _link(label: str, url: str) -> str:
    text = escape(label).replace("|", "¦")
    if _SAFE_URL.fullmatch(url):
        # A label can claim any destination ("[paypal.com](https://evil.test)"): unless it is the
        # link's own host or URL, the real host is shown beside it.
        host = _host(url)
        plain_label = label.strip().lower().removeprefix("https://").removeprefix("http://").rstrip("/")
        if plain_label not in {
            host,
            url.lower().removeprefix("https://").removeprefix("http://").rstrip("/"),
        }:
            text = f"{text} ({escape(host)})"
        return f"<{url.replace('&', '&amp;')}|{text}>"
    return f"{text} ({escape(url)})"  # not a web link: show it, do not make it clickable


def inline(text: str) -> str:
    """One line of Markdown as mrkdwn: emphasis, strikethrough, links; code spans escaped verbatim.

    markdown-it-py's inline parser (CommonMark's delimiter algorithm: linear in the line, where the
    lazy regexes this replaces were quadratic on `**a **a …`) gives the tokens; every text piece is
    escaped here, so model output cannot mention anyone or forge a link.
    """
    if not text:
        return ""
    tokens = _MD.parseInline(text, {})[0].children or []
    out: list[str] = []
    label: list[str] | None = None  # the text of the link being read, if inside one
    href = ""
    for token in tokens:
        kind = token.type
        if kind == "link_open":
            href, label = str(token.attrs.get("href") or ""), []
        elif kind == "link_close" and label is not None:
            out.append(_link("".join(label), href))
            label = None
        elif label is not None:
            label.append(token.content if kind in ("text", "code_inline") else "")
        else:
            out.append(_piece(token))
    if label is not None:  # an unclosed link: its text as text
        out.append(escape("".join(label)))
    return "".join(out)


def _piece(token: Token) -> str:
    """One inline token outside a link, as mrkdwn."""
    kind = token.type
    if kind == "code_inline":
        return "`" + escape(token.content.replace("`", "ˋ")) + "`"
    if kind in _MARKS:
        return _MARKS[kind]
    if kind == "image":
        return "!" + _link(token.content or "image", str(token.attrs.get("src") or ""))
    if kind in ("softbreak", "hardbreak"):
        return "\n"
    return escape(token.content)


_MARKS = {
    "strong_open": "*", "strong_close": "*", "em_open": "_", "em_close": "_", "s_open": "~", "s_close": "~",
}  # fmt: skip


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(lines: list[str]) -> list[str]:
    """A Markdown table as an aligned code block (Slack has no tables)."""
    rows = [_cells(line) for i, line in enumerate(lines) if i != 1]
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    sizes = [max(len(r[c]) for r in rows) for c in range(width)]
    text = [" | ".join(cell.ljust(sizes[c]) for c, cell in enumerate(row)).rstrip() for row in rows]
    text.insert(1, "-+-".join("-" * s for s in sizes))
    return [FENCE, *(escape(t) for t in text), FENCE]


def _heading_text(rest: str) -> str:
    """A heading's text without its optional closing run of #s (CommonMark: one after a space)."""
    text = rest.strip()
    bare = text.rstrip("#")
    return bare.rstrip() if not bare or bare[-1] in " \t" else text


def _block_line(line: str) -> str:
    if m := _HEADING.fullmatch(line):
        title = inline(_heading_text(m.group(1)).replace("**", "").replace("__", "")).strip("*")
        return f"*{title}*" if title else ""
    if m := _BULLET.match(line):
        return f"{m.group(1)}• {inline(m.group(2))}"
    if m := _ORDERED.match(line):
        return f"{m.group(1)}{m.group(2)}. {inline(m.group(3))}"
    if _RULE.match(line):
        return "──────────"
    if m := _QUOTE.match(line):
        return f">{inline(m.group(1))}"  # a literal ">" opens a quote; it cannot form a mention
    return inline(line)


def markdown_to_mrkdwn(md: str) -> str:
    """Convert Markdown to escaped Slack mrkdwn (see the module docstring)."""
    lines = md.replace("\r\n", "\n").replace("\x00", "").replace(_BOLD_MARK, "").split("\n")
    out: list[str] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = _FENCE_LINE.match(line)
        if fence is not None:
            if marker and marker.group(1) == fence and not line.strip()[3:].strip():
                out.append(FENCE)
                fence = None
            else:
                out.append(escape(line))
        elif marker:
            fence = marker.group(1)
            out.append(FENCE)  # the language tag would show as text in Slack
        elif (
            "|" in line
            and i + 1 < len(lines)
            and "|" in lines[i + 1]
            and _TABLE_SEP.fullmatch(lines[i + 1].strip())
        ):
            end = i + 2
            while end < len(lines) and "|" in lines[end] and lines[end].strip():
                end += 1
            out += _table(lines[i:end])
            i = end
            continue
        else:
            out.append(_block_line(line))
        i += 1
    if fence is not None:
        out.append(FENCE)
    return "\n".join(out)


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
    for line in text.split("\n"):
        for piece in _hard_wrap(line, limit - 2 * len(FENCE) - 2):
            toggles = piece.count(FENCE) % 2 == 1
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
