"""The same Slack request delivered twice (a retry, or to two front ends) starts one run: its run id,
the workflow id, derives from Slack's trigger or event id."""

from __future__ import annotations

from pathlib import Path

from bot.playground.payloads import encode_form, slash_command
from bot.runs.request import run_id_for
from tests.bot.harness import CHANNEL, REQUESTER, bot_harness


def test_run_ids_derive_from_the_delivery_and_are_random_without_one() -> None:
    assert run_id_for("command:T1") == run_id_for("command:T1") != run_id_for("command:T2")
    assert run_id_for(None) != run_id_for(None)
    assert run_id_for("event:Ev1").startswith("run-")
    assert len(run_id_for("event:Ev1")) == len(run_id_for(None))


async def test_a_slash_command_delivered_twice_runs_once(tmp_path: Path) -> None:
    async with bot_harness(tmp_path, agents=2) as bot:
        hook = bot.slack.response_url("cmd-twice", channel=CHANNEL, user=REQUESTER)
        body = encode_form(
            slash_command("summarise the incident", trigger_id="1337.42.abc", response_url=hook)
        )
        assert (await bot.post(body))[0] == 200
        assert (await bot.post(body))[0] == 200
        await bot.settle(60)
        runs = await bot.services.runs.history.recent()
        assert [r.state for r in runs] == ["finished"]
        finals = [c for c in bot.posts() if "final answer" in str(c.params.get("text")).lower()]
        assert len(finals) == 1
