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

from bot.runs.blocks import final_answer_messages
from orchestrator import RunFinished, RunView
from tests.bot.render.shapes import ADVERSARIAL

TARGET_S = 0.050


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
