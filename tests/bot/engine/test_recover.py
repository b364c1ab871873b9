"""At start-up only orphans are failed: runs a workflow still holds (here or elsewhere) resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals import ConversationRef
from bot.recovery import recover
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
        assert await engine.holding(["run-live", "run-orphan"]) == set()
        asked: list[list[str]] = []

        async def held(run_ids: list[str]) -> set[str]:  # ...but another instance's workflow holds run-live
            asked.append(sorted(run_ids))
            return {"run-live"} | await engine.holding(run_ids)

        history = bot.services.runs.history
        assert await recover(history, bot.services.approvals, bot.services.outbox, held=held) == 1
        assert asked == [["run-live", "run-orphan"]]  # one question for every run left running
        live, orphan = await history.get("run-live"), await history.get("run-orphan")
        assert live is not None
        assert orphan is not None
        assert (live.state, orphan.state) == ("running", "failed")
        await bot.settle()


async def test_a_run_resumed_after_its_park_edits_the_progress_message_it_posted_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.render import ids
    from tests.bot.approval_ui.test_scenarios_run_endings import ASK_RULES
    from tests.bot.harness import APPROVER
    from tests.fakes.provider_agent import protocol_agent
    from tests.fakes.provider_server import ProviderRequest, Reply

    def a1_asks(request: ProviderRequest) -> Reply:  # a2 answers (a progress line) while a1 waits
        asked = any(m.role == "assistant" and m.tool_calls for m in request.messages)
        if request.model == "gpt-test" and "run_command" in request.tools and not asked:
            return Reply(tool_calls=[("run_command", {"command": "echo needs-a-human"})])
        return protocol_agent(request)

    monkeypatch.setenv("MASSGEN_PROGRESS_AFTER", "0")  # the progress message is posted at once
    async with bot_harness(tmp_path, handler=a1_asks, agents=2, tools="real", team_extra=ASK_RULES) as bot:

        def progress_posts() -> list[str]:
            return [
                str(c.params["text"]) for c in bot.posts() if str(c.params.get("text")).startswith("Progress")
            ]

        await bot.command("say hello")
        await bot.wait_for(
            lambda: any(ids.APPROVE_ONCE in str(c.params.get("blocks")) for c in bot.posts()), 20
        )
        await bot.wait_for(lambda: bool(progress_posts()), 20)
        post = next(c for c in bot.posts() if ids.APPROVE_ONCE in str(c.params.get("blocks")))
        request_id = next(
            e["value"]
            for b in post.params["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == ids.APPROVE_ONCE
        )
        [parked] = await bot.services.runs.history.recent()
        held = await bot.services.engine.holding([parked.run_id, "run-unknown"])
        assert held == {parked.run_id}  # its workflow waits for the click: the engine holds it
        await bot.click(ids.APPROVE_ONCE, request_id, user=APPROVER)
        await bot.settle(30)
        assert (await bot.services.runs.history.recent())[0].state == "finished"
        assert len(progress_posts()) == 1, progress_posts()


async def test_a_run_ended_before_its_answer_was_saved_gets_it_posted_once(
    tmp_path: Path,
) -> None:
    """A kill between storing the run's end and saving its answer: the step's recovery posts it."""
    from sqlalchemy import delete

    from bot.slack.outbox import PRIORITY_FINAL
    from bot.slack.store import slack_outbox

    async with bot_harness(tmp_path) as bot:
        await bot.command("say hello")
        await bot.settle()
        [run] = await bot.services.runs.history.recent()
        assert run.state == "finished"
        assert run.thread_ts is not None

        def replies() -> int:
            return sum(1 for m in bot.slack.messages[CHANNEL].values() if m.get("thread_ts") == run.thread_ts)

        shown = replies()
        payload = {"task": "say hello", "requester": REQUESTER, "channel": CHANNEL, "thread_ts": None}
        supervisor = bot.services.runs.supervisor
        assert await supervisor.execute(run.run_id, payload) == "finished"  # its answer was saved: nothing
        await bot.settle()
        assert replies() == shown
        async with bot.services.storage.engine.begin() as conn:  # as if killed before it was saved
            await conn.execute(
                delete(slack_outbox).where(
                    slack_outbox.c.run_id == run.run_id, slack_outbox.c.priority == PRIORITY_FINAL
                )
            )
        assert await supervisor.execute(run.run_id, payload) == "finished"
        await bot.settle()
        assert replies() == shown + 1  # posted again, once
        assert await supervisor.execute(run.run_id, payload) == "finished"
        await bot.settle()
        assert replies() == shown + 1
