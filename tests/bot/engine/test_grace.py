"""SIGTERM honours its grace in every state: a run mid-turn and Slack down together still stop in time.

A stop has several parts (runs asked to end, background tasks drained, the outbox flushed, the
engine and database closed); each used to get the whole grace of its own, so a worker with a run
in flight and Slack failing took about three graces. Now they share one deadline, and what did not
get done is kept: the run stays pending in the engine, the posts stay saved in the outbox.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from bot.playground.emulator import SlackEmulator
from tests.bot.engine.procs import BotProcess, bot_env
from tests.bot.harness import APPROVER, TOKEN, team_yaml
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

GRACE = 2.0
MARGIN = 3.0  # the interpreter's own exit, logging, closing sockets


def _slow(request: ProviderRequest) -> Reply:
    return dataclasses.replace(protocol_agent(request), delay=60.0)  # every turn outlives the grace


async def test_sigterm_with_a_run_mid_turn_and_slack_down_exits_within_its_grace(tmp_path: Path) -> None:
    async with (
        SlackEmulator(bot_token=TOKEN, allowed_mentions={"U0USER", APPROVER}) as slack,
        ProviderServer(_slow) as provider,
    ):
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=2))
        env = bot_env(slack.api_url, f"sqlite:///{tmp_path / 'bot.db'}", MASSGEN_SHUTDOWN_GRACE=str(GRACE))
        bot = await BotProcess(["serve", "--team", str(team)], env, tmp_path).start()
        try:
            slack.fail_for(600.0)  # Slack answers 500 to everything: the status message waits in the outbox
            assert await bot.command("write release notes") == 200
            await slack.wait_for(lambda: len(provider.requests) >= 2, 30)  # both agents mid-turn
        finally:
            started = time.monotonic()
            code = await bot.stop(within=60)
            took = time.monotonic() - started
            slack.end_outage()
        assert code == 0, bot.output()
        assert took <= GRACE + MARGIN, (took, bot.output(tail=6000))
        assert "left pending in the engine" in bot.output(tail=0)
