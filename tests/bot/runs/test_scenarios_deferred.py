"""A side effect deferred during coordination reads as deferred (not a denial); the winner asks once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.render import ids
from orchestrator.events import ToolApprovalRequested
from tests.bot.harness import APPROVER, CHANNEL, BotHarness, bot_harness, team_yaml
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply

PUSH = "git push origin main"


def _pushes_while_coordinating_and_when_presenting(request: ProviderRequest) -> Reply:
    """Pushes first in each phase (coordination: deferred; presenting: asks), then follows the protocol."""
    if "run_command" in request.tools and not any(m.role == "tool" for m in request.messages):
        return Reply(tool_calls=[("run_command", {"command": PUSH})])
    return protocol_agent(request)


def _approval_posts(bot: BotHarness) -> list[Any]:
    """Approval requests in the run's channel (DM copies to approvers aside)."""
    posts = [c for c in bot.posts() if c.params["channel"] == CHANNEL]
    return [c for c in posts if ids.APPROVE_ONCE in str(c.params.get("blocks"))]


async def test_a_deferred_push_reads_deferred_to_the_winner_and_the_winner_asks_once(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MASSGEN_PROGRESS_AFTER", "0")
    handler = _pushes_while_coordinating_and_when_presenting
    async with bot_harness(tmp_path, handler=handler, agents=1, tools="real") as bot:
        teams = tmp_path / "teams"
        teams.mkdir(exist_ok=True)
        text = team_yaml(bot.provider, agents=1).replace("winner_reuse", "winner_present")
        (teams / "present.yaml").write_text(text)
        await bot.command("--team present release the fix")
        await bot.wait_for(lambda: bool(_approval_posts(bot)), 20)
        (ask,) = _approval_posts(bot)
        value = next(
            e["value"]
            for b in ask.params["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == ids.APPROVE_ONCE
        )
        await bot.click(ids.APPROVE_ONCE, value, user=APPROVER)
        await bot.settle(30)
        run = (await bot.services.runs.history.recent())[0]
        assert run.state == "finished"
        progress = next(
            m
            for m in bot.slack.messages[CHANNEL].values()
            if m.get("thread_ts") == run.thread_ts and str(m.get("text", "")).startswith("Progress")
        )
        shown = str(progress["blocks"])
        assert "deferred to the winner" in shown
        assert "⛔" not in shown
        (only,) = _approval_posts(bot)  # the one approval the winner's push needs, in the thread
        assert only.params["thread_ts"] == run.thread_ts
        events = await bot.services.run_store.events(run.run_id)
        assert len([e for e in events if isinstance(e, ToolApprovalRequested)]) == 1
