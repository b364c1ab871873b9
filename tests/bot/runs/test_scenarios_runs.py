"""Runs from Slack: status message, thread posts, final answer, follow-ups, cancel and finish-now, load."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from bot.playground.emulator import Fault
from bot.playground.payloads import encode_form, slash_command
from bot.render import ids
from orchestrator.events import RunStarted
from tests.bot.harness import APPROVER, CHANNEL, FAST, INTRUDER, REQUESTER, BotHarness, bot_harness
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply


def _root(bot: BotHarness) -> Any:
    roots = [c for c in bot.posts() if not c.params.get("thread_ts")]
    assert len(roots) == 1
    return roots[0]


def thread_messages(bot: BotHarness, root_ts: str, channel: str = CHANNEL) -> list[dict[str, Any]]:
    """The replies in a thread as Slack holds them now (edits applied), oldest first."""
    replies = [m for m in bot.slack.messages[channel].values() if m.get("thread_ts") == root_ts]
    return sorted(replies, key=lambda m: float(m["ts"]))


async def test_full_run_with_three_agents_posts_status_thread_and_final_answer(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MASSGEN_PROGRESS_AFTER", "0")  # this run is quick; show its progress message anyway

    def unhurried(request: ProviderRequest) -> Reply:
        # A run that ends before its thread exists posts no progress message: calls that take a
        # moment keep this one going past its root post on a loaded machine.
        reply = protocol_agent(request)
        reply.delay = 0.3
        return reply

    async with bot_harness(tmp_path, handler=unhurried) as bot:
        status, body = await bot.command("fix the flaky test in billing")
        assert (status, body) == (200, "")
        await bot.settle()
        run = (await bot.services.runs.history.recent())[0]
        assert (run.state, run.requester, run.task) == (
            "finished",
            REQUESTER,
            "fix the flaky test in billing",
        )
        assert run.final_answer
        root = _root(bot).params
        assert "fix the flaky test in billing" in str(root["blocks"])
        # The thread holds one progress message (edited in place) and the final answer, not a post
        # per answer and vote: Slack paces posts at ~1/s per channel (issue 9, item 8).
        assert run.thread_ts is not None
        thread = thread_messages(bot, run.thread_ts)
        assert len(thread) == 2
        shown = str(thread[0]["blocks"])
        assert shown.count("submitted an answer") == 3
        assert "votes for" in shown
        assert "Finished" in shown
        final = str(thread[1]["text"]) + str(thread[1]["blocks"])
        assert run.final_answer.split(":")[0] in final  # the final answer is in the thread
        # The status message ends showing the outcome, without the Cancel / Finish now buttons.
        updates = [c for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == run.thread_ts]
        assert updates
        assert ids.RUN_CANCEL not in str(updates[-1].params.get("blocks"))
        # One request per agent per phase, through each real SDK wire format.
        assert {r.api for r in bot.provider.requests} == {"responses", "messages", "chat"}


async def test_mention_starts_a_run_and_a_mention_in_its_thread_follows_up_with_context(
    tmp_path: Path,
) -> None:
    async with bot_harness(tmp_path) as bot:
        assert await bot.mention("summarise the incident") == 200
        await bot.settle()
        first = (await bot.services.runs.history.recent())[0]
        assert first.state == "finished"
        assert await bot.mention("now write the postmortem", thread_ts=first.thread_ts) == 200
        await bot.settle()
        follow_up = (await bot.services.runs.history.recent())[0]
        assert follow_up.run_id != first.run_id
        assert follow_up.thread_ts == first.thread_ts  # it posts into the same thread
        started = (await bot.services.run_store.events(follow_up.run_id))[0]
        assert isinstance(started, RunStarted)
        assert started.context == first.final_answer
        # Both runs used the same three provider clients (one per backend), built once.
        assert bot.services.models.size == 3


async def test_duplicate_event_delivery_starts_one_run(tmp_path: Path) -> None:
    from bot.playground.payloads import app_mention, encode_json

    async with bot_harness(tmp_path) as bot:
        body = encode_json(app_mention("count the widgets"))
        assert (await bot.post(body))[0] == 200
        assert (await bot.post(body))[0] == 200  # Slack retries an event it thinks was missed
        await bot.settle()
        assert len(await bot.services.runs.history.recent()) == 1


def _slow_first_answers(release: asyncio.Event) -> Any:
    async def handler(request: ProviderRequest) -> Reply:
        await release.wait()
        return protocol_agent(request)

    return handler


async def _running(bot: BotHarness) -> str:
    await bot.wait_for(lambda: bool(bot.services.runs.supervisor.active_runs()))
    return bot.services.runs.supervisor.active_runs()[0].handle.run_id


async def test_intruder_cannot_cancel_the_requester_can(tmp_path: Path) -> None:
    release = asyncio.Event()
    async with bot_harness(tmp_path, handler=_slow_first_answers(release)) as bot:
        await bot.command("long task")
        run_id = await _running(bot)
        await bot.click(ids.RUN_CANCEL, run_id, user=INTRUDER)
        await bot.wait_for(lambda: bool(bot.ephemerals(INTRUDER)))
        assert bot.services.runs.supervisor.active(run_id) is not None
        await bot.click(ids.RUN_CANCEL, run_id, user=REQUESTER)
        await bot.settle()
        release.set()
        run = await bot.services.runs.history.get(run_id)
        assert run is not None
        assert run.state == "cancelled"


async def test_approver_finish_now_salvages_and_cancel_command_reports_state(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def handler(request: ProviderRequest) -> Reply:
        # a1 answers at once; the others wait, so "finish now" salvages a1's answer.
        if request.model != "gpt-test":
            await release.wait()
        return protocol_agent(request)

    async with bot_harness(tmp_path, handler=handler) as bot:
        await bot.command("long task")
        run_id = await _running(bot)

        def answered() -> bool:
            active = bot.services.runs.supervisor.active(run_id)
            return active is not None and bool(active.renderer.view.agents[0].answers)

        await bot.wait_for(answered)
        await bot.click(ids.RUN_FINISH_NOW, run_id, user=APPROVER)
        await bot.settle()
        release.set()
        run = await bot.services.runs.history.get(run_id)
        assert run is not None
        assert run.state == "finished"
        assert run.final_answer
        shown = str(bot.slack.calls_to("chat.update")) + str(bot.slack.calls_to("chat.postMessage"))
        assert f"finished early, with the latest answer by <@{APPROVER}>" in shown  # who stopped it
        await bot.command(f"cancel {run_id}")
        await bot.settle()
        assert any("is not running (finished)" in t for t in bot.ephemerals(REQUESTER))


async def test_status_history_and_approvals_commands(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        await bot.command("first task")
        await bot.settle()
        for text in ("history", "status", "approvals"):
            await bot.command(text)
        await bot.settle()
        told = bot.ephemerals(REQUESTER)
        assert any("first task" in t for t in told)
        assert any("No runs are active" in t for t in told)
        assert any("Nothing is waiting for you" in t for t in told)


async def test_bot_not_in_channel_stops_the_run_and_tells_the_requester_privately(tmp_path: Path) -> None:
    release = asyncio.Event()
    async with bot_harness(tmp_path, handler=_slow_first_answers(release)) as bot:
        bot.slack.inject("chat.postMessage", Fault(error="not_in_channel", status=200, retry_after=None))
        payload = slash_command("audit the secrets", channel="C0PRIVATE")
        payload["response_url"] = bot.slack.response_url("k1")
        assert (await bot.post(encode_form(payload)))[0] == 200
        await bot.wait_for(lambda: bool(bot.slack.responses["k1"]))
        release.set()
        await bot.settle()
        told = bot.slack.responses["k1"][0]
        assert "not_in_channel" in told["text"]
        assert "/invite" in told["text"]
        assert told["response_type"] == "ephemeral"
        assert (await bot.services.runs.history.recent())[0].state == "cancelled"


async def test_a_quiet_run_still_refreshes_its_status_message(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MASSGEN_STATUS_REFRESH", "0.2")
    release = asyncio.Event()
    async with bot_harness(tmp_path, handler=_slow_first_answers(release)) as bot:
        await bot.command("wait for the provider")
        run_id = await _running(bot)
        root = bot.services.runs.supervisor.active(run_id).renderer.root  # type: ignore[union-attr]
        ts = await root.ts()

        def updates() -> int:
            return sum(1 for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == ts)

        seen = updates()
        await bot.wait_for(lambda: updates() >= seen + 2)  # no run events meanwhile: the ticker did it
        release.set()
        await bot.settle()


async def test_model_and_user_text_cannot_ping_the_channel_or_leak_secrets(tmp_path: Path) -> None:
    hostile = "<!channel> @here <@U0VICTIM> <https://evil.test|click> sk-ant-api03-" + "a" * 40

    def handler(request: ProviderRequest) -> Reply:
        reply = protocol_agent(request)
        if reply.tool_calls and reply.tool_calls[0][0] == "new_answer":
            reply.tool_calls = [("new_answer", {"content": hostile})]
        elif reply.tool_calls and reply.tool_calls[0][0] == "vote":
            name, args = reply.tool_calls[0]
            reply.tool_calls = [(name, {**args, "reason": hostile})]  # type: ignore[dict-item]
        return reply

    async with bot_harness(tmp_path, handler=handler, agents=2) as bot:
        await bot.command("&lt;!everyone&gt; summarise " + hostile.replace("<", "&lt;").replace(">", "&gt;"))
        await bot.settle()
        assert (await bot.services.runs.history.recent())[0].state == "finished"
        sent = str([c.params for c in bot.slack.calls])
        assert "a" * 40 not in sent  # the key-shaped secret was redacted everywhere
    # Leaving the harness asserts the emulator saw no live mention anywhere (text or blocks).


async def test_a_requester_hears_once_when_slack_loses_a_runs_posts_past_the_retry_window(
    tmp_path: Path,
) -> None:
    async with bot_harness(tmp_path, options=replace(FAST, retry_window=1.0)) as bot:
        await bot.command("summarise the incident")
        await bot.wait_for(lambda: bool(bot.posts()), 10)  # the status message is up
        bot.slack.fail_for(120.0, methods=["chat.postMessage"])  # then Slack stops taking posts
        await bot.settle(30)
        run = (await bot.services.runs.history.recent())[0]
        told = [t for t in bot.ephemerals(REQUESTER) if "Slack did not take" in t]
        assert len(told) == 1, bot.ephemerals(REQUESTER)
        assert run.run_id in told[0]
        assert bot.services.outbox.stats.given_up >= 1
        bot.slack.end_outage()
