"""Fifty concurrent runs in one channel: every run finishes, Slack sees zero limit violations."""

from __future__ import annotations

import time
from pathlib import Path

from bot.playground.emulator import Limits
from bot.wiring import OutboxOptions
from tests.bot.harness import bot_harness

# Slack's budgets on a clock compressed 100x (a "minute" lasts 0.6 s, one post per channel per 10 ms).
SCALE = 0.01
RUNS = 50


async def test_fifty_concurrent_runs_in_one_channel_stay_within_slack_limits(tmp_path: Path) -> None:
    limits = Limits(window=60.0 * SCALE, post_interval=1.0 * SCALE)
    async with bot_harness(tmp_path, limits=limits, options=OutboxOptions().scaled(SCALE)) as bot:
        acks = []
        for i in range(RUNS):
            started = time.perf_counter()
            status, body = await bot.command(f"task number {i}")
            acks.append(time.perf_counter() - started)
            assert (status, body) == (200, "")
        await bot.settle(90)
        runs = await bot.services.runs.history.recent(limit=RUNS + 1)
        assert len(runs) == RUNS
        assert {r.state for r in runs} == {"finished"}
        assert bot.slack.violations == []
        assert bot.services.outbox.stats.rate_limited == 0
        # Posts are what a busy channel runs short of: a quick run posts its status message and
        # its final answer, nothing else (no post per answer, vote or tool batch).
        assert len(bot.posts()) == 2 * RUNS
        # Slack allows 3 s; the bench measures the real percentiles on an unshared loop.
        assert sorted(acks)[int(RUNS * 0.99) - 1] < 1.5
        # Every run's status message ended in its final state (the last update is never dropped).
        for run in runs:
            assert run.thread_ts is not None
            root = bot.slack.messages["C0CHAN"][run.thread_ts]
            assert "run_cancel" not in str(root.get("blocks"))
