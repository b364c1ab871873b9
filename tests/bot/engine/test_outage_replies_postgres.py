"""While PostgreSQL is stopped, a command gets a "try again" and a click a "waiting", never silence.

Slack gets its ack at once (that needs no database), so a request whose work then meets the
database away used to end in a log line only: the user saw nothing and took it as done. A
Cancel click is kept (the run's end is retried until it is stored), so its clicker hears that it
waits for the database, and sees the run cancelled once the database is back. Real
processes, a PostgreSQL server of the test's own that it stops, the Slack emulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from bot.listeners.replies import TRY_AGAIN, WAITING
from bot.playground.emulator import SlackEmulator
from bot.playground.payloads import block_actions, encode_interactive, signed_request
from bot.render import ids
from tests.bot.engine.procs import BotProcess, bot_env, upgrade_schema
from tests.bot.engine.test_crash_sqlite import _status_posts
from tests.bot.engine.test_outage_postgres import own_cluster
from tests.bot.harness import APPROVER, CHANNEL, SECRET, TOKEN, team_yaml
from tests.conftest import postgres_url
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

USER = "U0USER"


def _slow(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=5.0)


def _cancel_button(slack: SlackEmulator) -> tuple[str, str]:
    """The first status message's ts and its Cancel button's value (the run id)."""
    root_ts = next(iter(slack.messages[CHANNEL]))
    for block in slack.messages[CHANNEL][root_ts]["blocks"]:
        for element in block.get("elements", []) if block["type"] == "actions" else []:
            if element["action_id"] == ids.RUN_CANCEL:
                return root_ts, str(element["value"])
    raise AssertionError("no Cancel button on the status message")


def _told(slack: SlackEmulator, text: str = TRY_AGAIN) -> list[str]:
    """What `USER` was shown that is exactly `text`."""
    return [str(e.get("text")) for e in slack.ephemerals if e.get("user") == USER and e.get("text") == text]


def _ours(bot: BotProcess) -> str:
    """The bot's own log lines (not DBOS's retries), for a failure's message."""
    lines = bot.output(tail=0).splitlines()
    return "\n".join(line for line in lines if re.search(r" (INFO|WARNING|ERROR) (bot|orchestrator)", line))


@pytest.mark.postgres
async def test_a_command_and_a_click_while_the_database_is_stopped_are_told_to_try_again(
    tmp_path: Path,
) -> None:
    if postgres_url() is None:  # where the PostgreSQL tests run (the binaries are there too)
        pytest.skip("no PostgreSQL (DATABASE_URL_POSTGRES)")
    with own_cluster() as cluster:
        async with (
            SlackEmulator(bot_token=TOKEN, allowed_mentions={USER, APPROVER}) as slack,
            ProviderServer(_slow) as provider,
        ):
            team = tmp_path / "team.yaml"
            team.write_text(team_yaml(provider, agents=2))
            env = bot_env(slack.api_url, cluster.url, MASSGEN_SHUTDOWN_GRACE="1")
            await upgrade_schema(env, tmp_path)
            bot = await BotProcess(["serve", "--team", str(team)], env, tmp_path).start(within=60)
            try:
                assert await bot.command("write release notes") == 200
                await slack.wait_for(lambda: bool(_status_posts(slack)), 30)
                root_ts, run_id = _cancel_button(slack)
                await asyncio.to_thread(cluster.stop)
                assert await bot.command("summarise the incident") == 200  # acked: no database needed
                try:
                    await slack.wait_for(lambda: len(_told(slack)) >= 1, 30)
                except TimeoutError:
                    raise AssertionError(_ours(bot)) from None
                payload = block_actions(
                    ids.RUN_CANCEL, run_id, user=USER, channel=CHANNEL, message_ts=root_ts
                )
                body = encode_interactive(payload)
                assert await bot.post(body, signed_request(body, SECRET)) == 200
                # Kept and waiting (the run's end is retried until stored), or not taken (when the
                # run had suspended, the control row cannot be written): either way, it is said.
                try:
                    await slack.wait_for(lambda: len(_told(slack, WAITING)) + len(_told(slack)) >= 2, 30)
                except TimeoutError:
                    raise AssertionError(_ours(bot)) from None
                await asyncio.to_thread(cluster.start)
                if not _told(slack, WAITING):  # told to try again: the requester clicks again
                    await asyncio.sleep(2.0)
                    assert await bot.post(body, signed_request(body, SECRET)) == 200
                try:
                    await slack.wait_for(
                        lambda: "Cancelled" in str(slack.messages[CHANNEL][root_ts].get("blocks")), 60
                    )
                except TimeoutError:
                    raise AssertionError(_ours(bot)) from None
            finally:
                with contextlib.suppress(subprocess.CalledProcessError):  # already up again
                    await asyncio.to_thread(cluster.start)
                await bot.stop(within=60)
    assert len(_told(slack)) + len(_told(slack, WAITING)) == 2, slack.ephemerals
