"""A front end and a worker as two processes on one SQLite file: the front end only enqueues and
forwards; the worker runs the run; Cancel clicked on the front end stops the run on the worker."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bot.playground.emulator import SlackEmulator
from bot.playground.payloads import block_actions, encode_interactive, signed_request
from bot.render import ids
from tests.bot.engine.procs import BotProcess, bot_env
from tests.bot.engine.test_crash_sqlite import _status_posts
from tests.bot.harness import APPROVER, CHANNEL, REQUESTER, SECRET, TOKEN, team_yaml
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply


def _slow(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=2.0)


async def test_cancel_clicked_on_a_front_end_stops_the_run_on_its_worker(tmp_path: Path) -> None:
    async with (
        SlackEmulator(bot_token=TOKEN, allowed_mentions={REQUESTER, APPROVER}) as slack,
        ProviderServer(_slow) as provider,
    ):
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=2))
        env = bot_env(slack.api_url, f"sqlite:///{tmp_path / 'bot.db'}")
        worker = await BotProcess(
            ["worker", "--team", str(team)], {**env, "MASSGEN_EXECUTOR_ID": "w1"}, tmp_path
        ).start()
        front = BotProcess(
            ["serve", "--role", "frontend", "--team", str(team)],
            {**env, "MASSGEN_EXECUTOR_ID": "f1"},
            tmp_path,
        )
        await front.start()
        try:
            assert await front.command("write release notes") == 200
            await slack.wait_for(lambda: bool(_status_posts(slack)) and bool(provider.requests), 30)
            root_ts = next(iter(slack.messages[CHANNEL]))
            blocks = slack.messages[CHANNEL][root_ts]["blocks"]
            run_id = next(
                e["value"]
                for b in blocks
                if b["type"] == "actions"
                for e in b["elements"]
                if e["action_id"] == ids.RUN_CANCEL
            )
            hook = slack.response_url("cancel", channel=CHANNEL, user=REQUESTER)
            payload = block_actions(
                ids.RUN_CANCEL, run_id, user=REQUESTER, channel=CHANNEL, message_ts=root_ts, response_url=hook
            )
            body = encode_interactive(payload)
            assert await front.post(body, signed_request(body, SECRET)) == 200
            await slack.wait_for(
                lambda: "Cancelled" in str(slack.messages[CHANNEL][root_ts].get("blocks")), 20
            )
        finally:
            assert await front.stop() == 0, front.output()
            assert await worker.stop() == 0, worker.output()
        shown = str(slack.messages[CHANNEL][root_ts]["blocks"])
        assert f"<@{REQUESTER}>" in shown  # cancelled by the clicker, on the worker
        assert ids.RUN_CANCEL not in shown
        # The front end never touched a model (not even the warm-up): the worker ran the run.
        assert "warmup.invalid" not in front.output(tail=0)
        assert "warmup.invalid" in worker.output(tail=0)
        assert "role frontend" in front.output(tail=0)
        assert slack.violations == []
