"""A run that ends while one of its approvals is pending cancels that approval, and Slack shows it.

One scenario per ending (Cancel, Finish now, the run timeout), over signed requests against the
emulator: the approval message loses its buttons and says why within seconds, a later click on
its old buttons is told it was cancelled and changes nothing, the audit says cancelled, and
`/massgen approvals` no longer lists it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.render import ids
from tests.bot.harness import APPROVER, REQUESTER, BotHarness, bot_harness
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply

ASK_RULES = "permissions: {policy: human, rules: {ask: ['command(echo *)']}}\n"
WITHIN = 5.0  # "within seconds": the rewrite is queued when the run ends, the outbox sends it


def _asks_and_waits(request: ProviderRequest) -> Reply:
    """The agent's first turn asks for a command a human must approve; then the protocol."""
    asked = any(m.role == "assistant" and m.tool_calls for m in request.messages)
    if "run_command" in request.tools and not asked:
        return Reply(tool_calls=[("run_command", {"command": "echo needs-a-human"})])
    return protocol_agent(request)


def _buttons(blocks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["action_id"]: e for b in blocks if b["type"] == "actions" for e in b["elements"]}


async def _pending_ask(bot: BotHarness) -> tuple[str, str, str]:
    """Start a run and wait for its approval message; returns (run id, request id, message ts)."""
    await bot.command("say hello")
    await bot.wait_for(lambda: any(ids.APPROVE_ONCE in str(c.params.get("blocks")) for c in bot.posts()), 20)
    post = next(c for c in bot.posts() if ids.APPROVE_ONCE in str(c.params.get("blocks")))
    request_id = str(_buttons(post.params["blocks"])[ids.APPROVE_ONCE]["value"])
    run_id = (await bot.services.runs.history.recent())[0].run_id  # live, or parked on the ask
    where = None
    for _ in range(100):
        where = await bot.services.store.approval_message(request_id)
        if where is not None:
            break
        await asyncio.sleep(0.05)
    assert where is not None, "the approval message was never recorded"
    return run_id, request_id, where[1]


def _rewrites(bot: BotHarness, ts: str) -> list[dict[str, Any]]:
    return [c.params for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == ts]


async def _assert_cancelled_in_slack(
    bot: BotHarness, request_id: str, ts: str, why: str, *, within: float = WITHIN
) -> None:
    """The message lost its buttons and says why; a late click is refused; nothing lists it."""
    await bot.wait_for(
        lambda: any(
            not _buttons(u.get("blocks") or []) and "Cancelled" in str(u) for u in _rewrites(bot, ts)
        ),
        within,
    )
    final = _rewrites(bot, ts)[-1]
    assert not _buttons(final.get("blocks") or [])
    assert f"Cancelled: {why}" in str(final["blocks"])
    request = await bot.services.approvals.get(request_id)
    assert request is not None
    assert request.status == "cancelled"
    # A later click on the old Approve button: told it was cancelled, and nothing changes.
    before = len(bot.ephemerals(APPROVER))
    await bot.click(ids.APPROVE_ONCE, request_id, user=APPROVER)
    await bot.wait_for(lambda: len(bot.ephemerals(APPROVER)) > before)
    reply = bot.ephemerals(APPROVER)[-1]
    assert "cancelled" in reply.lower()
    assert "approved" not in reply.lower()
    after = await bot.services.approvals.get(request_id)
    assert after is not None
    assert (after.status, after.decided_by) == ("cancelled", None)
    trail = await bot.services.approvals.audit_trail(run_id=request.run_id)
    outcomes = [e.outcome for e in trail if e.request_id == request_id]
    assert "cancelled" in outcomes
    assert "approved" not in outcomes
    # `/massgen approvals` no longer lists it.
    await bot.command("approvals", user=APPROVER)
    await bot.wait_for(lambda: bot.ephemerals(APPROVER)[-1] != reply)
    assert bot.ephemerals(APPROVER)[-1] == "Nothing is waiting for you."


@pytest.mark.parametrize(
    ("button", "why"),
    [(ids.RUN_CANCEL, "the run was cancelled"), (ids.RUN_FINISH_NOW, "the run was finished early")],
)
async def test_a_run_stopped_from_slack_cancels_its_pending_approval(
    tmp_path: Path, button: str, why: str
) -> None:
    async with bot_harness(
        tmp_path, handler=_asks_and_waits, agents=1, tools="real", team_extra=ASK_RULES
    ) as bot:
        run_id, request_id, ts = await _pending_ask(bot)
        await bot.click(button, run_id, user=REQUESTER)
        await _assert_cancelled_in_slack(bot, request_id, ts, why)
        await bot.settle(30)


async def test_a_parked_run_outlives_its_run_timeout_and_its_expired_ask_ends_the_wait(
    tmp_path: Path,
) -> None:
    # A run waiting for a human is parked: the wait is not working time, so the 3 s run timeout
    # does not end it; the approval's own expiry (a denial) does, and the run goes on to its end.
    async with bot_harness(
        tmp_path,
        handler=_asks_and_waits,
        agents=1,
        tools="real",
        team_extra=ASK_RULES,
        run_timeout=3,
        approval_timeout=5,
    ) as bot:
        run_id, request_id, _ = await _pending_ask(bot)
        expired = await asyncio.wait_for(bot.services.approvals.wait(request_id), 15)
        assert expired.status == "expired"  # not "cancelled": the run timeout never fired
        await bot.wait_for(
            lambda: any("final answer" in str(c.params.get("text")).lower() for c in bot.posts()), 20
        )
        await bot.settle(30)
        run = await bot.services.runs.history.get(run_id)
        assert run is not None
        assert run.state == "finished"
