"""Rendering an agent's answer for Slack: Markdown → mrkdwn on adversarial 16-64 KB texts.

Target: under 50 ms for 64 KB of the worst inputs found (issue 20: the regex converter took 6.7 s
on `"**a " * n`). Printed as the slowest of three runs per input, and its ratio to the target; the
16/32/64 KB columns show whether the time grows linearly (markdown-it-py's inline parser) or worse.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.render.mrkdwn import markdown_to_mrkdwn

TARGET_S = 0.050
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "'**a ' * n": lambda size: "**a " * (size // 4),
    "'__a ' * n": lambda size: "__a " * (size // 4),
    "'~~a ' * n": lambda size: "~~a " * (size // 4),
    "'*a ' * n": lambda size: "*a " * (size // 3),
    "'[a](' * n": lambda size: "[a](" * (size // 4),
    "'`a ' * n": lambda size: "`a " * (size // 3),
    "'[' * n": lambda size: "[" * size,
    "'*_' * n": lambda size: "*_" * (size // 2),
    "heading of '# '": lambda size: "# " + "# " * (size // 2) + "x",
    "heading of spaces": lambda size: "# x" + " " * size + "y",
    "a table row of '|'": lambda size: "|" * (size // 2) + "\n|-|\n" + "|" * (size // 2),
    "lines of '> **a'": lambda size: "> **a\n" * (size // 6),
    "ordinary answer": lambda size: "Some **bold**, a [link](https://e.com) and `code`.\n" * (size // 52),
}


def _slowest(text: str, runs: int = 3) -> float:
    worst = 0.0
    for _ in range(runs):
        started = time.perf_counter()
        markdown_to_mrkdwn(text)
        worst = max(worst, time.perf_counter() - started)
    return worst


def main() -> None:
    for name, make in ADVERSARIAL.items():
        figures = []
        for kb in (16, 32, 64):
            seconds = _slowest(make(kb * 1024))
            figures.append(f"{kb} KB {seconds * 1000:7.2f} ms")
        ratio = seconds / TARGET_S
        print(f"   {name:<22} " + "  ".join(figures) + f"   64 KB / target {ratio:5.2f}", flush=True)


if __name__ == "__main__":
    main()
