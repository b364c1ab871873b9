"""Smaller things a real workspace notices: mentions of colleagues, long pasted tasks, spoofed links."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from approvals import ConversationRef
from bot.recovery import recover
from bot.render import ids
from bot.runs.blocks import status_blocks
from orchestrator import RunView
from orchestrator.events import RunStarted
from tests.bot.harness import CHANNEL, REQUESTER, bot_harness
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply


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


async def test_model_links_show_their_real_host_and_bidi_overrides_never_reach_slack(tmp_path: Path) -> None:
    spoof = "Log in at [paypal.com](https://evil.test/login) and open invoice\u202egpj.exe"

    def handler(request: ProviderRequest) -> Reply:
        reply = protocol_agent(request)
        if reply.tool_calls and reply.tool_calls[0][0] == "new_answer":
            reply.tool_calls = [("new_answer", {"content": spoof})]
        return reply

    async with bot_harness(tmp_path, handler=handler, agents=1) as bot:
        await bot.command("where do I pay?")
        await bot.settle()
        final = next(c for c in bot.posts() if str(c.params["text"]).startswith("Final answer"))
        shown = str(final.params["blocks"])
        assert "<https://evil.test/login|paypal.com (evil.test)>" in shown
        assert "\u202e" not in str([c.params for c in bot.slack.calls])


async def test_the_requester_is_mentioned_when_the_answer_arrives(tmp_path: Path) -> None:
    async with bot_harness(tmp_path, agents=1) as bot:
        await bot.command("name the release")
        await bot.settle()
        final = next(c for c in bot.posts() if str(c.params["text"]).startswith("Final answer"))
        assert f"<@{REQUESTER}>" in str(final.params["text"])  # the notification rings the requester


async def test_a_dm_the_bot_cannot_post_in_gets_no_invite_advice(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def handler(request: ProviderRequest) -> Reply:
        await release.wait()
        return protocol_agent(request)

    async with bot_harness(tmp_path, handler=handler) as bot:
        bot.slack.add_channel("D0ELSEWHERE", im=True, bot_member=False)
        assert await bot.command("audit the secrets", channel="D0ELSEWHERE") == (200, "")
        await bot.wait_for(lambda: bool(bot.ephemerals(REQUESTER)))
        release.set()
        await bot.settle()
        (told,) = bot.ephemerals(REQUESTER)
        assert "channel_not_found" in told
        assert "/invite" not in told
        assert "Messages tab" in told


async def test_after_a_restart_a_lost_runs_status_message_loses_its_live_buttons(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        # What a killed process left behind: a live status message and a run marked running.
        initial = RunView.initial(task="migrate the db", requester=REQUESTER)
        view = dataclasses.replace(initial, run_id="run-lost")
        text, blocks = status_blocks(view, now=time.time())
        ts = await bot.services.outbox.post(CHANNEL, text=text, blocks=blocks).ts()
        assert ids.RUN_CANCEL in str(bot.slack.messages[CHANNEL][ts]["blocks"])
        where = ConversationRef(surface="slack", channel=CHANNEL)
        await bot.services.run_store.append(
            RunStarted(
                run_id="run-lost",
                seq=1,
                task="migrate the db",
                agents=(),
                requester=REQUESTER,
                conversation=where,
            )
        )
        await bot.services.store.record_run("run-lost", CHANNEL)
        await bot.services.store.set_root("run-lost", ts)
        assert await recover(bot.services.runs.history, bot.services.approvals, bot.services.outbox) == 1
        await bot.settle()
        shown = str(bot.slack.messages[CHANNEL][ts]["blocks"])
        assert ids.RUN_CANCEL not in shown
        assert ids.RUN_FINISH_NOW not in shown
        assert "Failed" in shown
        assert "restarted" in shown
