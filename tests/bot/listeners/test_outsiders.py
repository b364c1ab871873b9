"""Users of another workspace (a Slack Connect partner), refused on every surface the bot serves.

One request per surface, signed and sent to the real Bolt app over HTTP: each is answered with
that surface's refusal, and nothing starts, is decided or is shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.approval_ui.texts import OUTSIDER
from bot.listeners.workspaces import REFUSED
from bot.playground.payloads import (
    app_home_opened,
    app_mention,
    block_actions,
    encode_form,
    encode_interactive,
    encode_json,
    slash_command,
    view_submission,
)
from bot.render import ids
from tests.bot.harness import APPROVER, CHANNEL, REQUESTER, BotHarness, bot_harness
from tests.bot.listeners.test_listeners import _ask

OTHER = "T0OTHERCO"
GUEST = "U0GUEST"


def _from_partner(payload: dict[str, Any]) -> dict[str, Any]:
    """An interaction by a user of the partner's workspace (their `user.team_id`)."""
    payload["user"]["team_id"] = OTHER
    return payload


async def _click(bot: BotHarness, action_id: str, value: str, user: str = GUEST) -> tuple[int, str]:
    hook = bot.slack.response_url(f"click-{len(bot.slack.hooks) + 1}", channel=CHANNEL, user=user)
    click = block_actions(action_id, value, user=user, channel=CHANNEL, response_url=hook)
    return await bot.post(encode_interactive(_from_partner(click)))


async def _nothing_started(bot: BotHarness) -> None:
    await bot.settle()
    assert await bot.services.runs.history.recent() == []
    assert bot.provider.requests == []


async def test_a_slash_command_is_refused_in_its_ack(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        for text in ("deploy the billing service", "status", "settings", "help"):
            hook = bot.slack.response_url(f"cmd-{text}", channel=CHANNEL, user=GUEST)
            fields = slash_command(text, user=GUEST, team=OTHER, response_url=hook)
            status, reply = await bot.post(encode_form(fields))
            assert (status, reply) == (200, REFUSED)  # the ack's text, shown to them only
        await _nothing_started(bot)
        assert bot.posts() == []
        assert bot.slack.calls_to("views.open") == []
        assert bot.ephemerals(GUEST) == []


def _connect_mention(text: str, **event: Any) -> dict[str, Any]:
    body = app_mention(text, user=GUEST)
    body["event"]["user_team"] = body["event"]["team"] = OTHER
    body["event"].update(event)
    body["is_ext_shared_channel"] = True
    return body


async def test_a_mention_is_refused_once_to_the_guest_only(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        body = _connect_mention("run the migrations", thread_ts="1700000000.000001")
        for _ in range(2):  # Slack redelivers: one refusal
            assert (await bot.post(encode_json(body)))[0] == 200
        # A partner's bot mentioning ours is not answered at all.
        assert (await bot.post(encode_json(_connect_mention("ping", bot_id="B0PARTNER"))))[0] == 200
        await _nothing_started(bot)
        assert bot.ephemerals(GUEST) == [REFUSED]
        (told,) = bot.slack.ephemerals
        assert told.get("thread_ts") == "1700000000.000001"
        assert bot.posts() == []


async def test_approve_and_deny_clicks_are_refused_and_audited(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request_id = await _ask(bot)
        await bot.settle()
        for action_id in (ids.APPROVE_ONCE, ids.APPROVE_RUN, ids.DENY):
            assert (await _click(bot, action_id, request_id, user=APPROVER)) == (200, "")
        await bot.settle()
        assert (await bot.services.approvals.get(request_id)).status == "pending"  # type: ignore[union-attr]
        assert bot.ephemerals(APPROVER) == [OUTSIDER] * 3
        assert bot.slack.calls_to("views.open") == []
        trail = await bot.services.approvals.audit_trail(run_id="run-home")
        refused = [e for e in trail if e.outcome == "rejected" and e.actor == APPROVER]
        assert [OTHER in str(e.reason) for e in refused] == [True] * 3


async def test_the_home_tab_shows_only_the_refusal(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        await _ask(bot)
        await bot.settle()
        body = app_home_opened(GUEST)
        body["event"]["user_team"] = OTHER
        assert (await bot.post(encode_json(body)))[0] == 200
        await bot.settle()
        (call,) = bot.slack.calls_to("views.publish", ok=True)
        assert call.params["user_id"] == GUEST
        shown = str(call.params["view"])
        assert REFUSED in shown
        assert "kubectl" not in shown
        assert GUEST not in bot.services.home.viewers


async def test_every_other_click_is_refused_and_opens_nothing(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request_id = await _ask(bot)
        await bot.settle()
        others = (ids.DETAILS, ids.VIEW_DIFF, ids.RUN_CANCEL, ids.RUN_FINISH_NOW, ids.ANSWER_FULL)
        for action_id in others:
            assert (await _click(bot, action_id, request_id)) == (200, "")
        await bot.settle()
        assert bot.ephemerals(GUEST) == [REFUSED] * len(others)
        assert bot.slack.calls_to("views.open") == []
        assert (await bot.services.approvals.get(request_id)).status == "pending"  # type: ignore[union-attr]


async def test_a_view_submission_is_refused_in_the_modal(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request_id = await _ask(bot)
        await bot.click(ids.DENY, request_id, user=APPROVER)
        await bot.settle()
        values = {"reason": {"text": {"type": "plain_text_input", "value": "their reason"}}}
        submitted = view_submission(ids.DENY_MODAL, values, user=GUEST, private_metadata=request_id)
        status, reply = await bot.post(encode_interactive(_from_partner(submitted)))
        assert status == 200
        answer = json.loads(reply)
        assert answer["response_action"] == "update"
        assert REFUSED in str(answer["view"])
        await bot.settle()
        request = await bot.services.approvals.get(request_id)
        assert request is not None
        assert (request.status, request.decision_reason) == ("denied", None)
        assert bot.ephemerals(GUEST) == []


async def test_our_own_people_are_served_beside_them(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        assert await bot.command("summarise the incident", user=REQUESTER) == (200, "")
        await bot.settle()
        assert [r.requester for r in await bot.services.runs.history.recent()] == [REQUESTER]
