"""Rendering an agent's final answer for Slack, on adversarial 16-64 KB texts.

What a run's end does with the answer, whole: redaction, Markdown → mrkdwn, the split into
messages and their blocks.

Target: under 50 ms for 64 KB of the worst inputs found (issue 20: the regex converter took 6.7 s
on `"**a " * n`, markdown-it-py about a second on `"![" * n`; pulldown-cmark's compiled parser
now). Each input is timed as the best of three runs (what the work costs, not what a busy shared
core preempted); the 16/32/64 KB columns show whether the time grows linearly, and the last line
names the slowest input at 64 KB against the target.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.runs.blocks import final_answer_messages
from orchestrator import RunFinished, RunView

TARGET_S = 0.050
# The shapes of tests/bot/render/test_mrkdwn.py's linearity test, then others that made a parser
# work hard: unmatched delimiters, deep nesting, many tiny blocks (which the walk budget stops,
# bot/render/mrkdwn.py), and an ordinary answer.
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "'![' * n": lambda n: "![" * (n // 2),
    "'[' * n": lambda n: "[" * n,
    "'**a ' * n": lambda n: "**a " * (n // 4),
    "'_a ' * n": lambda n: "_a " * (n // 3),
    "'`' * n": lambda n: "`" * n,
    "'<' * n": lambda n: "<" * n,
    "'*' * n": lambda n: "*" * n,
    "'*_' * n": lambda n: "*_" * (n // 2),
    "'~~a ' * n": lambda n: "~~a " * (n // 4),
    "'[a](' * n": lambda n: "[a](" * (n // 4),
    "'> ' * n (deep quote)": lambda n: "> " * (n // 2) + "x",
    "lines of '> **a'": lambda n: "> **a\n" * (n // 6),
    "'- ' * n (deep list)": lambda n: "- " * (n // 2) + "x",
    "a table n columns wide": lambda n: "|a" * (n // 4) + "|\n" + "|-" * (n // 4) + "|\n",
    "a table row of '|'": lambda n: "|" * (n // 2) + "\n|-|\n" + "|" * (n // 2),
    "spaces after a pipe line": lambda n: "a|b\n" + " " * n + "|x",
    "heading of spaces": lambda n: "# x" + " " * n + "y",
    "heading of '# '": lambda n: "# " * (n // 2) + "x",
    "rule of spaces": lambda n: "-" + " " * n + "x",
    "'word ' * n": lambda n: "word " * (n // 5),
    "'![[a](`<**_' mixed": lambda n: ("![[a](`<**_" * n)[:n],
    "'__a ' * n": lambda n: "__a " * (n // 4),
    "'*a ' * n": lambda n: "*a " * (n // 3),
    "'`a ' * n": lambda n: "`a " * (n // 3),
    "'>' * n (deep quote)": lambda n: ">" * n + "x",
    "nested images": lambda n: "![" * (n // 6) + "a" + "](b)" * (n // 6),
    "nested brackets": lambda n: "[" * (n // 6) + "a" + "](b)" * (n // 6),
    "nested '**'": lambda n: "*" * (n // 2) + "a" + "*" * (n // 2),
    "nested '*_'": lambda n: "*_" * (n // 4) + "a" + "_*" * (n // 4),
    "nested '*a _a '": lambda n: "*a _a " * (n // 12) + "a" + " a_ a*" * (n // 12),
    "lines of '- a' / '  - b'": lambda n: "- a\n  - b\n" * (n // 10),
    "'#\\n' * n headings": lambda n: "#\n" * (n // 2),
    "'-\\n' * n empty items": lambda n: "-\n" * (n // 2),
    "'a\\n\\n' * n paragraphs": lambda n: "a\n\n" * (n // 3),
    "tiny tables": lambda n: "|a|\n|-|\n\n" * (n // 9),
    "'<a>' * n inline HTML": lambda n: "<a>" * (n // 3),
    "'[a](b)' * n links": lambda n: "[a](b)" * (n // 6),
    "ordinary answer": lambda n: "Some **bold**, a [link](https://e.com) and `code`.\n" * (n // 52),
}


def _best(text: str, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        final_answer_messages(RunFinished(winner="a1", answer=text), RunView())
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    worst = ("", 0.0)
    for name, make in ADVERSARIAL.items():
        figures = []
        for kb in (16, 32, 64):
            seconds = _best(make(kb * 1024))
            figures.append(f"{kb} KB {seconds * 1000:7.2f} ms")
        worst = max(worst, (name, seconds), key=lambda pair: pair[1])
        print(
            f"   {name:<28} " + "  ".join(figures) + f"   64 KB / target {seconds / TARGET_S:5.2f}",
            flush=True,
        )
    name, seconds = worst
    goal = f"goal < {TARGET_S * 1000:.0f} ms"
    print(f"   render 64 KB adversarial: worst {name} {seconds * 1000:.1f} ms ({goal})", flush=True)


if __name__ == "__main__":
    main()
