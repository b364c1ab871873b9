"""A large final answer renders in a worker thread: the event loop keeps serving meanwhile."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bot.runs.blocks import OFF_LOOP_CHARS, final_answer_messages, render_answer_modal, render_final_answer
from orchestrator import RunFinished, RunView

_PROSE = "Some **bold** text, a [link](https://example.com/x) and `code`, then words.\n\n- one\n- two\n\n"
# About 0.2 s of rendering (1 MB of ordinary Markdown): long enough to see a stall.
LARGE = (_PROSE * (1024 * 1024 // len(_PROSE) + 1))[: 1024 * 1024]


def _best_of_3(answer: str) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        final_answer_messages(RunFinished(winner="a1", answer=answer), RunView())
        best = min(best, time.perf_counter() - started)
    return best


def test_a_final_answers_cost_grows_linearly_with_its_length() -> None:
    """Four times the answer, about four times the work (it was quadratic: one redaction per message)."""
    small, large = LARGE[: 64 * 1024], LARGE[: 256 * 1024]
    assert _best_of_3(large) < 8 * _best_of_3(small)


async def _longest_gap_while(work: asyncio.Future[Any]) -> float:
    """The longest time between two ticks of a 5 ms ticker while `work` runs."""
    longest, last = 0.0, time.perf_counter()
    while not work.done():
        await asyncio.sleep(0.005)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    return longest


async def test_a_large_final_answer_leaves_the_loop_responsive() -> None:
    event = RunFinished(winner="a1", answer=LARGE)
    started = time.perf_counter()
    rendering = asyncio.ensure_future(render_final_answer(event, RunView()))
    gap = await _longest_gap_while(rendering)
    took = time.perf_counter() - started
    assert gap < max(took / 4, 0.05), (gap, took)  # the ticker kept ticking all along
    assert await rendering == final_answer_messages(event, RunView())


async def test_a_large_modal_leaves_the_loop_responsive() -> None:
    started = time.perf_counter()
    rendering = asyncio.ensure_future(render_answer_modal("a1.1", LARGE))
    gap = await _longest_gap_while(rendering)
    assert gap < max((time.perf_counter() - started) / 4, 0.05)
    assert (await rendering)["type"] == "modal"


async def test_a_small_answer_renders_at_once() -> None:
    event = RunFinished(winner="a1", answer="**done**" * (OFF_LOOP_CHARS // 16))
    assert await render_final_answer(event, RunView()) == final_answer_messages(event, RunView())
