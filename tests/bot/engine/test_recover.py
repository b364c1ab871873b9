"""At start-up only orphans are failed: runs a workflow still holds (here or elsewhere) resume."""

from __future__ import annotations

from pathlib import Path

from approvals import ConversationRef
from bot.wiring import recover
from orchestrator.events import RunStarted
from tests.bot.harness import CHANNEL, REQUESTER, bot_harness


async def test_a_new_instance_never_fails_the_runs_an_engine_still_holds(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        where = ConversationRef(surface="slack", channel=CHANNEL)
        for run_id in ("run-live", "run-orphan"):
            started = RunStarted(
                run_id=run_id, seq=1, task="x", agents=(), requester=REQUESTER, conversation=where
            )
            await bot.services.run_store.append(started)
            await bot.services.store.record_run(run_id, CHANNEL)
        engine = bot.services.engine
        # Neither has a workflow in this engine: both would be orphans here...
        assert not await engine.holds("run-live")
        assert not await engine.holds("run-orphan")

        async def alive(run_id: str) -> bool:  # ...but another instance's workflow holds run-live
            return run_id == "run-live" or await engine.holds(run_id)

        history = bot.services.runs.history
        assert await recover(history, bot.services.approvals, bot.services.outbox, alive=alive) == 1
        live, orphan = await history.get("run-live"), await history.get("run-orphan")
        assert live is not None
        assert orphan is not None
        assert (live.state, orphan.state) == ("running", "failed")
        await bot.settle()
