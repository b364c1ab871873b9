"""Smaller things a real workspace notices: mentions of colleagues, long pasted tasks."""

from __future__ import annotations

from pathlib import Path

from orchestrator.events import RunStarted
from tests.bot.harness import REQUESTER, bot_harness


async def test_a_mention_keeps_the_colleagues_it_names_and_drops_only_the_bot(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        assert await bot.mention("ask <@U0ALICE> about the outage") == 200
        await bot.settle()
        run = (await bot.services.runs.history.recent())[0]
        assert run.task == "ask <@U0ALICE> about the outage"
        started = (await bot.services.run_store.events(run.run_id))[0]
        assert isinstance(started, RunStarted)
        assert "<@U0BOT>" not in started.task
    # Leaving the harness asserts no live mention of U0ALICE was posted (the task is shown escaped).


async def test_a_pasted_stack_trace_is_a_task_and_a_longer_one_is_refused_saying_why(tmp_path: Path) -> None:
    trace = "Traceback (most recent call last):\n" + '  File "app.py", line 1, in main\n' * 250
    assert 8_000 < len(trace) < 12_000
    async with bot_harness(tmp_path) as bot:
        assert await bot.command(f"why does this fail?\n{trace}") == (200, "")
        await bot.settle()
        (run,) = await bot.services.runs.history.recent()
        assert run.requester == REQUESTER
        assert run.task.endswith("in main")
        status, reply = await bot.command("x" * 12_001)
        assert status == 200
        assert "the limit is 12,000" in reply
        assert "Trim it" in reply
        await bot.settle()
        assert len(await bot.services.runs.history.recent()) == 1
