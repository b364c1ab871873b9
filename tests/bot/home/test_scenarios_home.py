"""App Home: my pending approvals with their buttons, clicks from the tab, and the tab following new asks."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from approvals import Ask
from approvals.models import Approvers
from approvals.permissions import Action, Decision, action_digest
from bot.approval_ui import ThreadApprovalPort
from bot.playground.payloads import block_actions, encode_interactive, encode_json
from bot.render import ids
from tests.bot.harness import APPROVER, CHANNEL, REQUESTER, BotHarness, bot_harness


def _home_opened(user: str) -> dict[str, Any]:
    return {
        "token": "legacy",
        "team_id": "T0001",
        "api_app_id": "A0001",
        "type": "event_callback",
        "event_id": f"EvHome{user}",
        "event_time": 1,
        "event": {
            "type": "app_home_opened",
            "user": user,
            "channel": "D0001",
            "tab": "home",
            "event_ts": "1.0",
        },
    }


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


def _published(bot: BotHarness, user: str) -> int:
    return sum(1 for c in bot.slack.calls_to("views.publish", ok=True) if c.params["user_id"] == user)


def _home_of(bot: BotHarness, user: str) -> Any:
    return [
        c.params["view"] for c in bot.slack.calls_to("views.publish", ok=True) if c.params["user_id"] == user
    ][-1]


async def test_app_home_shows_my_pending_approvals_with_buttons_and_a_home_click_decides(
    tmp_path: Path,
) -> None:
    async with bot_harness(tmp_path) as bot:
        request_id = await _ask(bot)
        assert (await bot.post(encode_json(_home_opened(APPROVER))))[0] == 200
        await bot.wait_for(lambda: bool(bot.slack.calls_to("views.publish", ok=True)))
        view = bot.slack.calls_to("views.publish", ok=True)[-1].params["view"]
        assert "kubectl rollout restart" in str(view)
        assert request_id in str(view)
        # The requester sees no buttons for it (they cannot approve their own run's request).
        await bot.post(encode_json(_home_opened(REQUESTER) | {"event_id": "EvHome2"}))
        await bot.wait_for(lambda: _published(bot, REQUESTER) == 1)
        assert request_id not in str(_home_of(bot, REQUESTER))

        click = block_actions(
            ids.APPROVE_ONCE, request_id, user=APPROVER, view={"id": "V0HOME", "type": "home"}
        )
        assert (await bot.post(encode_interactive(click)))[0] == 200
        decided = await asyncio.wait_for(bot.services.approvals.wait(request_id), 5)
        assert decided.status == "approved"
        # The click came from Home: the approver's Home is republished without the request.
        await bot.wait_for(lambda: request_id not in str(_home_of(bot, APPROVER)))


async def test_a_home_deny_decides_and_republishes_the_home_tab(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request_id = await _ask(bot)
        await bot.post(encode_json(_home_opened(APPROVER)))
        await bot.wait_for(lambda: _published(bot, APPROVER) == 1)
        assert request_id in str(_home_of(bot, APPROVER))
        click = block_actions(ids.DENY, request_id, user=APPROVER, view={"id": "V0HOME", "type": "home"})
        assert (await bot.post(encode_interactive(click)))[0] == 200
        decided = await asyncio.wait_for(bot.services.approvals.wait(request_id), 5)
        assert decided.status == "denied"
        await bot.wait_for(lambda: request_id not in str(_home_of(bot, APPROVER)))


async def test_home_tab_of_an_approver_follows_new_and_decided_asks(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        await bot.post(encode_json(_home_opened(APPROVER)))
        await bot.wait_for(lambda: len(bot.slack.calls_to("views.publish", ok=True)) == 1)
        request_id = await _ask(bot)  # no click on Home needed: the tab is republished
        await bot.wait_for(lambda: request_id in str(bot.slack.calls_to("views.publish", ok=True)[-1].params))
        await bot.click(ids.APPROVE_ONCE, request_id, user=APPROVER)
        await bot.wait_for(
            lambda: request_id not in str(bot.slack.calls_to("views.publish", ok=True)[-1].params)
        )
        await bot.settle()
        assert {c.params["user_id"] for c in bot.slack.calls_to("views.publish")} == {APPROVER}
