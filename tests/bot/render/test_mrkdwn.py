"""Markdown → mrkdwn conversion and message splitting."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.render.escape import escape, plain, safe
from bot.render.mrkdwn import FENCE, markdown_to_mrkdwn, split_message
from tests.bot.render.shapes import ADVERSARIAL


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        ("# Title", "*Title*"),
        ("### **Bold** heading", "*Bold heading*"),
        ("some **bold** text", "some *bold* text"),
        ("__also bold__", "*also bold*"),
        ("an *italic* word", "an _italic_ word"),
        ("an _italic_ word", "an _italic_ word"),
        ("~~gone~~", "~gone~"),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("[docs](https://example.com/a?b=1&c=2)", "<https://example.com/a?b=1&amp;c=2|docs (example.com)>"),
        # A label claiming another destination shows the real host; one naming its own host does not.
        ("[paypal.com](https://evil.test/login)", "<https://evil.test/login|paypal.com (evil.test)>"),
        ("[example.com](https://Example.com/)", "<https://Example.com/|example.com>"),
        ("[mail me](mailto:a@b.test)", "<mailto:a@b.test|mail me (a@b.test)>"),
        ("[x](javascript:alert(1))", "x (javascript:alert(1))"),
        ("[a|b](https://e.com)", "<https://e.com|a¦b (e.com)>"),
        ("- one\n* two\n  + nested", "• one\n• two\n  • nested"),
        ("1. first\n2) second", "1. first\n2. second"),
        ("> quoted <b>", ">quoted &lt;b&gt;"),
        ("---", "──────────"),
        ("use `a <b> **c**` here", "use `a &lt;b&gt; **c**` here"),
        ("```python\nx = 1 < 2  # **not bold**\n```", "```\nx = 1 &lt; 2  # **not bold**\n```"),
        ("```\nunclosed", "```\nunclosed\n```"),
        ("~~~\ntilde fence\n~~~", "```\ntilde fence\n```"),
        ("| a | bb |\n|---|:-:|\n| 1 | 2 |", "```\na | bb\n--+---\n1 | 2\n```"),
        ("x | y without separator", "x | y without separator"),
        ("<!channel> & @here", "&lt;!channel&gt; &amp; @\u2060here"),
        # CommonMark as pulldown-cmark reads it: autolinks, reference links, setext headings.
        ("<https://e.com/x>", "<https://e.com/x|https://e.com/x>"),
        ("<me@x.test>", "<mailto:me@x.test|me@x.test>"),
        ("[docs]\n\n[docs]: https://e.com", "<https://e.com|docs (e.com)>"),
        ("first line\nsecond\n---", "*first line second*"),
        ("# H\ntext", "*H*\n\ntext"),
        # A table cell shows its text: its marks and link targets would be noise in a code block.
        ("| **a** | `b` |\n|---|---|\n| [l](https://e.com) | 2 |", "```\na | b\n--+--\nl | 2\n```"),
        ("<div>\n**x** <@U1>\n</div>", "&lt;div&gt;\n**x** &lt;@U1&gt;\n&lt;/div&gt;"),
        ("[x](https://[)", "<https://[|x (https://[)>"),  # no host to read: shown whole, no error
        ("[![img](https://i.test/a.png) label](https://e.com)", "<https://e.com|img label (e.com)>"),
        ("-\n- b", "•\n• b"),
        ("- a\n\n  more\n- b", "• a\n\n  more\n• b"),
        ("> - one\n> - two", ">• one\n>• two"),
        ("10. ten\n11. eleven", "10. ten\n11. eleven"),
        ("***both***", "_*both*_"),
    ],
)
def test_markdown_to_mrkdwn(md: str, expected: str) -> None:
    assert markdown_to_mrkdwn(md) == expected


# Pieces a model (or someone quoting one) could write to ping people or forge a link.
_HOSTILE = [
    "<@U1>", "<!here>", "<!channel>", "@here", "[a](https://e.com)", "[x](javascript:1)", "<https://e.com>",
    "<a@b.c>", "**", "*", "_", "~~", "`", "```", "\n", "\n\n", "> ", "- ", "1. ", "# ", "|", "|-|", "![",
    "](", ")", "<", ">", "&", "&lt;", "&#60;", "\\", " ", "a", "<div>", "<!-- ", "[r]",
    "[r]: https://r.e\n", "    ", "---",
]  # fmt: skip
_LINK = re.compile(r"<(?:https?://|mailto:)[^\s<>|]+\|[^<>]*>")
_LINE_PREFIX = re.compile(r"^(?:>|  |• |\d+\. )*", re.MULTILINE)  # quotes and list items


@given(st.lists(st.sampled_from(_HOSTILE), max_size=60))
@settings(max_examples=300, deadline=None)
def test_only_links_and_quotes_keep_angle_brackets(pieces: list[str]) -> None:
    """Every `<` or `>` shown is a web or mail link the converter built, or a line's quote mark."""
    shown = _LINE_PREFIX.sub("", _LINK.sub("", markdown_to_mrkdwn("".join(pieces))))
    assert "<" not in shown
    assert ">" not in shown


def test_containers_past_eight_levels_on_a_line_show_as_text() -> None:
    assert markdown_to_mrkdwn("> " * 12 + "x") == ">" * 8 + "&gt; " * 4 + "x"
    assert markdown_to_mrkdwn("- " * 10 + "x") == "• " * 8 + "- - x"
    assert markdown_to_mrkdwn("1. " * 10 + "x") == "1. " * 10 + "x"  # 8 lists, then "1. 1. x" as text
    assert markdown_to_mrkdwn("- " * 8 + "x") == "• " * 8 + "x"


def test_a_text_past_its_walk_budget_is_shown_escaped() -> None:
    tiny_blocks = "#\n<@U1>\n" * 2000  # an event or more per character
    assert markdown_to_mrkdwn(tiny_blocks) == escape(tiny_blocks)
    assert markdown_to_mrkdwn("#\n<@U1>\n" * 20).startswith("\n\n&lt;@U1&gt;")  # small: rendered


@pytest.mark.parametrize(
    "answer",
    [
        "Some **bold**, a [link](https://e.com) and `code`.\n",
        "| file | status |\n|---|---|\n" + "| a.py | ok |\n" * 50,
        "- item number\n",
        "1. Run `make test` now\n",
        "## file.py\ndone\n",  # a report: a heading and a line per file
    ],
)
def test_answers_people_write_stay_within_the_walk_budget(answer: str) -> None:
    text = answer * (64 * 1024 // len(answer))
    assert markdown_to_mrkdwn(text) != escape(text)


def fences_balanced(chunk: str) -> bool:
    return sum(line.count(FENCE) for line in chunk.split("\n")) % 2 == 0


def test_split_closes_and_reopens_code_blocks() -> None:
    text = (
        "intro\n"
        + FENCE
        + "\n"
        + "\n".join(f"line {i} of code" for i in range(200))
        + "\n"
        + FENCE
        + "\nafter"
    )
    chunks = split_message(text, limit=500)
    assert len(chunks) > 3
    assert all(len(c) <= 500 for c in chunks)
    assert all(fences_balanced(c) for c in chunks)
    assert all(c.startswith(FENCE) for c in chunks[1:-1])
    rejoined = "\n".join(c for chunk in chunks for c in chunk.split("\n") if c != FENCE)
    assert rejoined == "\n".join(line for line in text.split("\n") if line != FENCE)


def test_split_short_text_is_one_chunk() -> None:
    assert split_message("hello", 3000) == ["hello"]


def test_split_hard_wraps_long_lines_without_cutting_entities() -> None:
    line = ("word &amp; " * 400).strip()
    chunks = split_message(line, limit=300)
    assert all(len(c) <= 300 for c in chunks)
    assert all(c.count("&") == c.count("&amp;") for c in chunks)


def test_split_rejects_a_limit_that_cannot_hold_a_fence() -> None:
    with pytest.raises(ValueError, match="too small"):
        split_message("x", limit=5)


@given(
    st.lists(
        st.sampled_from(["text line", FENCE, "x" * 120, "", "code  <>&", "more words here"]), max_size=80
    ),
    st.integers(min_value=40, max_value=400),
)
@settings(max_examples=200, deadline=None)
def test_split_properties(lines: list[str], limit: int) -> None:
    chunks = split_message("\n".join(lines), limit)
    assert all(len(c) <= limit for c in chunks)
    assert all(fences_balanced(c) for c in chunks)


def test_bidi_overrides_are_removed_from_everything_shown() -> None:
    spoof = "invoice\u202egpj.exe and \u2066isolated\u2069 \u202aembedded\u202c"
    for shown in (markdown_to_mrkdwn(spoof), safe(spoof), plain(spoof, 200)):
        assert not any(ch in shown for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
        assert "invoicegpj.exe" in shown


def _best_seconds(text: str, tries: int = 3) -> float:
    """The fastest of a few conversions: what the work costs, not what a busy core preempted."""
    times = []
    for _ in range(tries):
        started = time.perf_counter()
        markdown_to_mrkdwn(text)
        times.append(time.perf_counter() - started)
    return min(times)


@pytest.mark.parametrize("make", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
def test_adversarial_answers_convert_in_linear_time(make: Callable[[int], str]) -> None:
    # 8 times the text may take about 8 times as long (quadratic: 64, cubic: 512); the bound sits
    # halfway (32) so that a busy shared machine cannot fail a linear shape; a ratio, as load slows
    # both sizes alike, and a 1 ms floor under the small one against timer noise on a fast shape.
    # `bench/bench_render.py` prints the absolute figures.
    small = _best_seconds(make(8 * 1024))
    large = _best_seconds(make(64 * 1024))
    assert large < 32 * max(small, 0.001), (large, small)
    assert "<@" not in markdown_to_mrkdwn(make(64 * 1024))
