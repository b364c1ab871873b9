"""Fifty concurrent runs in one channel through the outbox, against the emulator at Slack's limits.

Each run posts a root status message, changes its status every ~1.5 s for a minute (agents
thinking, answering, voting), posts two answers and a final answer into its thread, and sets
its final status. The emulator enforces Slack's limits (chat.update 50/min per workspace,
chat.postMessage ~1/s per channel) and counts 429s.

Scenarios: 1, 5 and 50 concurrent runs (50 is the issue's case). Figures: Slack calls per run,
429s, status freshness (status change → visible in Slack, p50/p99) and thread post latency.
`BENCH_OUTBOX_SCALE` (default 10) divides every limit window and interval by that factor so the
bench takes ~35 s instead of ~6 min; times are reported in Slack seconds
(multiplied back). `BENCH_OUTBOX_SCALE=1` runs in real time.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import statistics
import time
from collections import Counter

from slack_sdk.web.async_client import AsyncWebClient

from bot.playground.emulator import Limits, SlackEmulator
from bot.slack.outbox import PRIORITY_FINAL, MessageRef, Outbox

RUN_COUNTS = (1, 5, 50)  # the headline figure is 50; 1 and 5 show the unsaturated case
CHANNEL = "C0BENCH"
RUN_SECONDS = 60.0  # Slack seconds of status changes per run
STEP_SECONDS = 1.5
_VERSION = re.compile(r"run (\d+) v(\d+)")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _run(
    n: int, box: Outbox, scale: float, changed: dict[tuple[int, int], float], posts: list[float]
) -> None:
    rng = random.Random(n)
    waiters: list[asyncio.Task[None]] = []
    await asyncio.sleep(rng.uniform(0, 5) / scale)  # runs start over the first few seconds
    root = box.post(CHANNEL, text=f"run {n} v0")
    steps = int(RUN_SECONDS / STEP_SECONDS)
    answer_steps = {steps // 3, 2 * steps // 3}
    for k in range(1, steps + 1):
        await asyncio.sleep(rng.uniform(0.5, 1.5) * STEP_SECONDS / scale)
        changed[(n, k)] = time.monotonic()
        box.update(root, text=f"run {n} v{k}")
        if k in answer_steps:
            asked = time.monotonic()
            ref = box.post(CHANNEL, text=f"run {n} answer {k}", thread=root)  # as bot/runs/presenter.py does
            waiters.append(asyncio.create_task(_record_post(ref, asked, posts)))
    final = box.post(CHANNEL, text=f"run {n} final answer", thread=root, priority=PRIORITY_FINAL)
    changed[(n, steps + 1)] = time.monotonic()
    box.update(root, text=f"run {n} v{steps + 1} done")
    await final.ts()
    await asyncio.gather(*waiters)


async def _record_post(ref: MessageRef, asked: float, posts: list[float]) -> None:
    await ref.ts()
    posts.append(time.monotonic() - asked)


def _freshness(
    slack: SlackEmulator, changed: dict[tuple[int, int], float]
) -> tuple[list[float], list[float]]:
    """Per status change: seconds until Slack showed it (or a newer state); all, and once the root existed."""
    shown: dict[int, list[tuple[float, int]]] = {}
    posted: dict[int, float] = {}
    for call in slack.calls:
        m = _VERSION.match(str(call.params.get("text", "")))
        if m and call.error is None and call.method in ("chat.update", "chat.postMessage"):
            shown.setdefault(int(m.group(1)), []).append((call.at, int(m.group(2))))
            if call.method == "chat.postMessage":
                posted[int(m.group(1))] = call.at
    delays, after_root = [], []
    for (n, k), at in changed.items():
        seen = [t for t, version in shown.get(n, []) if version >= k and t >= at]
        if seen:
            delays.append(min(seen) - at)
            if at >= posted.get(n, float("inf")):
                after_root.append(min(seen) - at)
    return delays, after_root


async def _bench(scale: float, runs: int) -> None:
    limits = Limits(window=60.0 / scale, post_interval=1.0 / scale, retry_after=1)
    async with SlackEmulator(limits=limits) as slack:
        client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
        box = Outbox(
            client, update_interval=2.0 / scale, channel_interval=1.0 / scale, budget_window=60.0 / scale
        )
        await box.start()
        changed: dict[tuple[int, int], float] = {}
        posts: list[float] = []
        started = time.monotonic()
        await asyncio.gather(*(_run(n, box, scale, changed, posts) for n in range(runs)))
        await box.flush()
        elapsed = (time.monotonic() - started) * scale
        await box.close()
        fresh, after_root = ([d * scale for d in ds] for ds in _freshness(slack, changed))
        by_method = Counter(c.method for c in slack.calls)
        limited = sum(1 for c in slack.calls if c.status == 429)
        post_delays = [p * scale for p in posts]
        print(f"   runs: {runs} in one channel; time scale 1/{scale:g}; {elapsed:.0f} Slack seconds")
        print(f"   Slack calls per run: {len(slack.calls) / runs:.1f} ({dict(by_method)})")
        print(f"   status changes: {len(changed)}; chat.update sent: {by_method['chat.update']}")
        print(f"   429s: {limited}; emulator violations: {len(slack.violations)}")
        print(f"   status freshness, all changes: {_summary(fresh)}; unseen {len(changed) - len(fresh)}")
        print(f"   status freshness once the root was posted: {_summary(after_root)}")
        print(
            f"   (bound: one refresh per message every max(2, {runs} / 45 * 60) ="
            f" {max(2.0, runs / 45 * 60):.0f} s)"
        )
        print(f"   thread post latency: {_summary(post_delays)}")


def _summary(values: list[float]) -> str:
    if not values:
        return "n/a"
    mean = statistics.fmean(values)
    return f"p50 {_pct(values, 0.5):.1f} s, p99 {_pct(values, 0.99):.1f} s, mean {mean:.1f} s"


def main() -> None:
    scale = float(os.environ.get("BENCH_OUTBOX_SCALE", "10"))
    for runs in RUN_COUNTS:
        asyncio.run(_bench(scale, runs))


if __name__ == "__main__":
    main()
