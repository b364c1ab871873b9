"""Listener surfaces beyond commands: answers on demand, forged button values, broadcast."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from approvals import Ask
from approvals.models import Approvers
from approvals.permissions import Action, Decision, action_digest
from bot.approval_ui import ThreadApprovalPort
from bot.playground.payloads import block_actions, encode_interactive
from bot.render import ids
from tests.bot.harness import APPROVER, CHANNEL, REQUESTER, BotHarness, bot_harness
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply


async def _ask(bot: BotHarness) -> str:
    root = bot.services.outbox.post(CHANNEL, text="a run")
    request = await ThreadApprovalPort(bot.services.approvals, CHANNEL, root).request(
        Ask(
            run_id="run-home",
            agent_id="a2",
            requester=REQUESTER,
            action=Action(kind="command", target="kubectl rollout restart deploy/api"),
            digest=action_digest("run_command", {"command": "kubectl rollout restart deploy/api"}),
            decision=Decision(
                verdict="ask", resolved="ask", risk="medium", layer="risk", reason="restarts prod"
            ),
            approvers=Approvers(users=frozenset({APPROVER})),
            timeout=timedelta(minutes=10),
        )
    )
    return request.id


async def test_show_full_answer_opens_a_modal_with_the_whole_text(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MASSGEN_PROGRESS_AFTER", "0")  # the run's progress message holds the buttons
    long_answer = "Step by step. " * 200

    def handler(request: ProviderRequest) -> Reply:
        reply = protocol_agent(request)
        if reply.tool_calls and reply.tool_calls[0][0] == "new_answer":
            reply.tool_calls = [("new_answer", {"content": long_answer})]
        # A run that ends before its thread exists posts no progress message (and so no Show full):
        # model calls that take a moment keep this run going past its root post on a loaded machine.
        reply.delay = 0.3
        return reply

    async with bot_harness(tmp_path, handler=handler, agents=2) as bot:
        await bot.command("explain the outage")
        await bot.settle()
        progress = next(
            m for m in bot.slack.messages["C0CHAN"].values() if ids.ANSWER_FULL in str(m.get("blocks"))
        )
        value = next(
            e["value"]
            for b in progress["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == ids.ANSWER_FULL
        )
        await bot.click(ids.ANSWER_FULL, value, user=REQUESTER)
        await bot.wait_for(lambda: bool(bot.slack.calls_to("views.open", ok=True)))
        view = bot.slack.calls_to("views.open", ok=True)[-1].params["view"]
        assert str(view).count("Step by step.") >= 150


async def test_final_answer_is_broadcast_when_configured(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MASSGEN_BROADCAST_FINAL", "true")
    async with bot_harness(tmp_path, agents=2) as bot:
        await bot.command("name the release")
        await bot.settle()
        broadcast = [c for c in bot.posts() if c.params.get("reply_broadcast")]
        assert len(broadcast) == 1
        assert str(broadcast[0].params["text"]).startswith("Final answer")
        assert broadcast[0].params.get("thread_ts")  # still a thread reply, also shown in the channel


async def test_forged_button_values_from_other_channels_reveal_nothing(tmp_path: Path) -> None:
    async with bot_harness(tmp_path, agents=2) as bot:
        request_id = await _ask(bot)
        await bot.command("secret roadmap task")
        await bot.settle()
        run = (await bot.services.runs.history.recent())[0]
        outsider = "U0OUTSIDER"
        for action_id, value in [(ids.DETAILS, request_id), (ids.ANSWER_FULL, f"{run.run_id}:agent1.1")]:
            await bot.click(action_id, value, user=outsider, channel="C0OTHER")
        await bot.command(f"status {run.run_id}", user=outsider, channel="C0OTHER")
        await bot.settle()
        # Details opened its modal at once (the trigger lives 3 s), then said only "no such request".
        outsider_views = [str(c.params["view"]) for c in bot.slack.calls_to("views.update", ok=True)]
        assert len(outsider_views) == 1
        assert "no longer exists" in outsider_views[0]
        told = bot.ephemerals(outsider)
        assert len(told) == 2
        assert not any("secret roadmap" in t or "kubectl" in t for t in told + outsider_views)
        # The requester may ask about their run from anywhere; an approver sees details from Home.
        await bot.command(f"status {run.run_id}", user=REQUESTER, channel="C0OTHER")
        home_click = block_actions(
            ids.DETAILS, request_id, user=APPROVER, view={"id": "V0HOME", "type": "home"}
        )
        await bot.post(encode_interactive(home_click))
        await bot.settle()
        assert any("secret roadmap" in t for t in bot.ephemerals(REQUESTER))
        assert "kubectl" in str(bot.slack.calls_to("views.update", ok=True)[-1].params["view"])
