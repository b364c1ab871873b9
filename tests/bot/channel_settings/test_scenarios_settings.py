"""`/massgen settings` through real Bolt and the Slack emulator; defaults and `--repo` on runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from bot.channel_settings import REFUSED
from bot.playground.forge import demo_remote
from bot.playground.payloads import encode_interactive, view_submission
from bot.render import ids
from tests.bot.harness import APPROVER, CHANNEL, INTRUDER, REQUESTER, BotHarness, bot_harness
from tests.bot.runs.test_scenarios_runs import _running, _slow_first_answers

ADMIN = "U0ADMIN"
LEAD = "U0LEAD"


def _configure(bot: BotHarness) -> None:
    """Two repositories by name (what the repos section of the team file will list) and an admin."""
    channels = bot.services.channels
    channels.choices = dataclasses.replace(channels.choices, repositories=("billing", "web"))
    bot.slack.allowed_mentions.add(LEAD)  # "cancelled by @lead" mentions them
    bot.slack.users[ADMIN] = {
        "id": ADMIN,
        "name": "admin",
        "is_admin": True,
        "is_bot": False,
        "deleted": False,
    }


def _settings_views(bot: BotHarness) -> list[dict[str, Any]]:
    return [
        c.params["view"]
        for c in bot.slack.calls_to("views.update", ok=True)
        if c.params["view"].get("callback_id") == ids.SETTINGS_MODAL
    ]


def _values(
    *, repo: str | None = None, policy: str | None = None, approvers: tuple[str, ...] = ()
) -> dict[str, Any]:
    def option(value: str | None) -> dict[str, Any]:
        chosen = None if value is None else {"text": {"type": "plain_text", "text": value}, "value": value}
        return {ids.SETTING_INPUT: {"type": "static_select", "selected_option": chosen}}

    return {
        ids.SETTING_REPOSITORY: option(repo),
        ids.SETTING_POLICY: option(policy),
        ids.SETTING_APPROVERS: {
            ids.SETTING_INPUT: {"type": "multi_users_select", "selected_users": list(approvers)}
        },
        ids.SETTING_GROUP: {ids.SETTING_INPUT: {"type": "plain_text_input", "value": None}},
    }


async def _submit(bot: BotHarness, values: dict[str, Any], *, user: str) -> tuple[int, str]:
    payload = view_submission(ids.SETTINGS_MODAL, values, user=user, private_metadata=CHANNEL)
    return await bot.post(encode_interactive(payload))


async def test_an_admin_opens_the_modal_saves_and_the_change_is_audited(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        _configure(bot)
        assert await bot.command("settings", user=ADMIN) == (200, "")
        await bot.wait_for(lambda: any("input" in str(v["blocks"]) for v in _settings_views(bot)))
        opened = bot.slack.calls_to("views.open")
        assert [c.error for c in opened] == [None]  # with the command's own fresh trigger
        form = _settings_views(bot)[-1]
        assert form["private_metadata"] == CHANNEL
        assert form["submit"]["text"] == "Save"
        by_block = {b.get("block_id"): b for b in form["blocks"]}
        repo = by_block[ids.SETTING_REPOSITORY]["element"]
        assert [o["value"] for o in repo["options"]] == ["billing", "web"]
        assert by_block[ids.SETTING_APPROVERS]["element"]["type"] == "multi_users_select"
        assert next(o["value"] for o in by_block[ids.SETTING_POLICY]["element"]["options"]) == "human"

        status, body = await _submit(
            bot, _values(repo="billing", policy="human", approvers=(LEAD,)), user=ADMIN
        )
        assert (status, body) == (200, "")
        await bot.wait_for(lambda: any("saved" in e for e in bot.ephemerals(ADMIN)))
        saved = next(e for e in bot.ephemerals(ADMIN) if "saved" in e)
        assert "repository: unset → `billing`" in saved
        trail = [(c.actor, c.field, c.old, c.new) for c in await bot.services.channels.store.audit(CHANNEL)]
        assert trail == [
            (ADMIN, "repository", None, "billing"),
            (ADMIN, "policy", None, "human"),
            (ADMIN, "approvers", None, LEAD),
        ]
        # The modal opened again shows what is saved.
        await bot.command("settings", user=LEAD)  # a channel approver now
        await bot.wait_for(lambda: len([v for v in _settings_views(bot) if "input" in str(v["blocks"])]) == 2)
        again = {b.get("block_id"): b for b in _settings_views(bot)[-1]["blocks"]}
        assert again[ids.SETTING_REPOSITORY]["element"]["initial_option"]["value"] == "billing"
        assert again[ids.SETTING_APPROVERS]["element"]["initial_users"] == [LEAD]


async def test_someone_who_is_neither_approver_nor_admin_is_refused_and_nothing_changes(
    tmp_path: Path,
) -> None:
    async with bot_harness(tmp_path) as bot:
        _configure(bot)
        await bot.command("settings", user=REQUESTER)
        await bot.wait_for(lambda: REFUSED in bot.ephemerals(REQUESTER))
        assert all("input" not in str(v["blocks"]) for v in _settings_views(bot)), "no form for them"
        assert [c.params["user"] for c in bot.slack.calls_to("users.info")] == [REQUESTER]
        # A submission of a modal they never got (or an old one) is refused the same way.
        await _submit(bot, _values(repo="web"), user=INTRUDER)
        await bot.wait_for(lambda: REFUSED in bot.ephemerals(INTRUDER))
        await bot.settle()
        assert await bot.services.channels.store.get(CHANNEL) is None
        assert await bot.services.channels.store.audit(CHANNEL) == []
        # The team file's approver may (no admin lookup needed).
        await _submit(bot, _values(repo="web"), user=APPROVER)
        await bot.wait_for(lambda: any("saved" in e for e in bot.ephemerals(APPROVER)))
        stored = await bot.services.channels.store.get(CHANNEL)
        assert stored is not None
        assert stored.repository == "web"


async def test_a_name_not_configured_is_an_error_under_its_field_before_the_ack(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        _configure(bot)
        values = _values(repo="secret-repo")
        values[ids.SETTING_GROUP][ids.SETTING_INPUT]["value"] = "not-a-group"
        status, body = await _submit(bot, values, user=ADMIN)
        assert status == 200
        answer = json.loads(body)
        assert answer["response_action"] == "errors"
        assert set(answer["errors"]) == {ids.SETTING_REPOSITORY, ids.SETTING_GROUP}
        assert "billing, web" in answer["errors"][ids.SETTING_REPOSITORY]
        await bot.settle()
        assert await bot.services.channels.store.get(CHANNEL) is None


def _status_texts(bot: BotHarness) -> list[str]:
    calls = bot.slack.calls_to("chat.postMessage", ok=True) + bot.slack.calls_to("chat.update", ok=True)
    return [
        json.dumps(c.params.get("blocks"), ensure_ascii=False)
        for c in calls
        if c.params.get("channel") == CHANNEL
    ]


async def test_a_run_uses_the_channel_defaults_and_its_status_says_which(tmp_path: Path) -> None:
    release = asyncio.Event()
    remote = demo_remote(tmp_path / "forge")  # a run on `billing` fetches it
    repos = f"repositories:\n  - {{name: billing, url: 'file://{remote}', forge: none}}\n"
    handler = _slow_first_answers(release)
    async with bot_harness(tmp_path, handler=handler, team_extra=repos, state_dir=tmp_path / "s") as bot:
        _configure(bot)
        await _submit(bot, _values(repo="billing", approvers=(LEAD,)), user=ADMIN)
        await bot.wait_for(lambda: any("saved" in e for e in bot.ephemerals(ADMIN)))
        await bot.command("fix the flaky test")
        run_id = await _running(bot)
        active = bot.services.runs.supervisor.active(run_id)
        assert active is not None
        assert active.request.selection is not None
        assert active.request.selection.repository == "billing"
        # The channel's approver joins the team file's: they may stop the run (and approve its asks).
        assert active.team.approvals.approvers == [APPROVER, LEAD]
        await bot.wait_for(lambda: any("(channel default)" in t for t in _status_texts(bot)))
        line = next(t for t in _status_texts(bot) if "(channel default)" in t)
        assert "repo `billing` (channel default) · team default · policy `" in line
        await bot.click(ids.RUN_CANCEL, run_id, user=LEAD)
        await bot.settle()
        release.set()
        run = await bot.services.runs.history.get(run_id)
        assert run is not None
        assert run.state == "cancelled"
        # The payload a worker would resume from keeps the selection and the channel's approvers.
        payload = active.request.payload()
        assert payload["selection"]["repository"] == "billing"
        assert payload["selection"]["approvers"] == [LEAD]


async def test_an_unknown_repo_is_a_one_line_error_listing_the_names(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        _configure(bot)
        assert await bot.command("--repo nope fix it") == (200, "")
        expected = "Unknown repository `nope`. You may use: `billing`, `web`."
        await bot.wait_for(lambda: expected in bot.ephemerals(REQUESTER))
        assert await bot.mention("<@U0BOT> repo=nada fix it") == 200
        await bot.wait_for(
            lambda: "Unknown repository `nada`. You may use: `billing`, `web`." in bot.ephemerals(REQUESTER)
        )
        await bot.settle()
        assert await bot.services.runs.history.recent() == [], "nothing started"
