"""An engine launched paused starts no run step until its steps open: start-up work comes first."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from dbos import DBOS

from bot.engine.workflow import WORKFLOW, host
from tests.bot.harness import bot_harness


async def test_a_run_dequeued_while_paused_begins_only_once_the_steps_open(tmp_path: Path) -> None:
    async with bot_harness(tmp_path, agents=1) as bot:
        engine = bot.services.engine
        # As `build_services` launches it: the runs it recovers (or dequeues) wait at their step.
        loop = asyncio.get_running_loop()
        host(bot.services.runs.supervisor, loop, park_timeout=engine.config.park_timeout, paused=True)
        assert (await bot.command("say hello"))[0] == 200
        [run_id] = await _workflows("PENDING", within=10)  # dequeued: its workflow runs, its step waits
        await asyncio.sleep(0.5)
        assert not bot.provider.requests  # no agent called a model: the run has not begun
        assert not bot.services.runs.supervisor.active_runs()
        engine.open_steps()
        assert await _workflows("SUCCESS", within=30) == [run_id]
        assert bot.provider.requests
        await bot.settle()


async def _workflows(status: str, *, within: float) -> list[str]:
    """The run workflows in `status`, once there is one (DBOS has no event to wait on)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = await DBOS.list_workflows_async(name=WORKFLOW, status=[status], load_input=False)
        if found:
            return [w.workflow_id for w in found]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no run workflow became {status} within {within} s")
