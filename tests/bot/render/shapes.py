"""Adversarial Markdown for the renderer: the linearity test's shapes and the bench's, one table.

Each made a regex backtrack or a parser work hard once (the regex converter took 6.7 s on
`"**a " * n`, markdown-it-py about a second on `"![" * n`, markdown-it-pyrs was quadratic on nested
emphasis and crashed on `">" * 60000`).
"""

from __future__ import annotations

from collections.abc import Callable

# Each a function of the size in characters: unmatched delimiters, deep nesting, many tiny blocks
# (which the walk budget stops, bot/render/mrkdwn.py), and an ordinary answer.
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
