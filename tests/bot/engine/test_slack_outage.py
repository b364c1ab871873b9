"""A 20 s Slack outage (every Web API call answers 503) under the real bot (one process, SQLite).

The runs are taken while Slack is away, ask for approval and are approved, and end: nothing is
lost and nothing is repeated. Each run's status message, its approval request and its final answer
reach Slack exactly once after the outage, and each approved command runs once (that a restart
repeats nothing is `test_disk_full`'s and `test_crash_sqlite`'s). Before the outbox retried for
minutes, two of six runs never appeared in Slack at all and their approval requests failed.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bot.playground.emulator import SlackEmulator
from bot.playground.payloads import block_actions, encode_interactive, signed_request
from bot.render import ids
from tests.bot.engine.procs import BotProcess, bot_env
from tests.bot.engine.test_crash_sqlite import _asks_once, _final_posts, _status_posts
from tests.bot.harness import APPROVER, CHANNEL, SECRET, TOKEN, team_yaml
from tests.fakes.provider_server import ProviderServer

OUTAGE = 20.0  # seconds
RUNS = 2


def _approval_requests(slack: SlackEmulator) -> dict[str, str]:
    """Each approval message in the channel: its request id (the Approve button's value) -> its ts."""
    found: dict[str, str] = {}
    for ts, message in dict(slack.messages.get(CHANNEL, {})).items():
        for block in message.get("blocks") or []:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if element.get("action_id") == ids.APPROVE_ONCE:
                    found[str(element["value"])] = str(ts)
    return found


async def _approve(bot: BotProcess, slack: SlackEmulator, request_id: str, message_ts: str) -> None:
    hook = slack.response_url(f"approve-{request_id}", channel=CHANNEL, user=APPROVER)
    payload = block_actions(
        ids.APPROVE_ONCE, request_id, user=APPROVER, channel=CHANNEL, message_ts=message_ts, response_url=hook
    )
    body = encode_interactive(payload)
    assert await bot.post(body, signed_request(body, SECRET)) == 200


@dataclass
class SlackOutage:
    """What a Slack outage left (`slack_outage`)."""

    side: list[str]  # the approved commands' runs, one line each
    statuses: int  # status messages posted
    asked: int  # approval requests posted in the runs' threads
    final_threads: int  # threads with a final answer
    finals: int  # final answers posted
    doubled: list[tuple[str, str, str]]  # any message posted twice in the same place
    seen_after: float  # seconds from Slack's return until every approval request was in Slack


async def slack_outage(cwd: Path, *, outage: float = OUTAGE) -> SlackOutage:
    """RUNS runs taken while every Web API call answers 503 for `outage` s; approved once seen."""
    side = cwd / "side.txt"
    async with (
        SlackEmulator(bot_token=TOKEN, allowed_mentions={"U0USER", APPROVER}) as slack,
        ProviderServer(_asks_once(side)) as provider,
    ):
        team = cwd / "team.yaml"
        extra = "permissions: {policy: human, rules: {ask: ['command(echo *)']}}\n"
        team.write_text(team_yaml(provider, agents=2, extra=extra, approval_timeout=600))
        env = bot_env(slack.api_url, f"sqlite:///{cwd / 'bot.db'}")
        args = ["serve", "--team", str(team)]
        bot = await BotProcess(args, env, cwd).start()
        try:
            slack.fail_for(outage, status=503)
            began = time.monotonic()
            for i in range(RUNS):
                assert await bot.command(f"write release notes {i}") == 200  # acked: no Web API call
            # The runs go on while Slack is away: each reaches its approval, unseen.
            await slack.wait_for(lambda: len(provider.requests) >= RUNS, 30)
            assert _status_posts(slack) == []
            await slack.wait_for(lambda: len(_approval_requests(slack)) >= RUNS, outage + 60)
            seen_after = time.monotonic() - began - outage
            assert seen_after >= -1.0  # nothing reached Slack before it came back
            for request_id, message_ts in _approval_requests(slack).items():
                await _approve(bot, slack, request_id, message_ts)
            try:
                await slack.wait_for(lambda: len(_final_posts(slack)) >= RUNS, 60)
            except TimeoutError:
                raise AssertionError(bot.output(tail=0)[-20000:]) from None
        finally:
            assert await bot.stop(within=60) == 0, bot.output()
    asked = [  # in the runs' threads (each approver also gets a DM copy)
        c
        for c in slack.calls_to("chat.postMessage", ok=True)
        if ids.APPROVE_ONCE in str(c.params.get("blocks")) and c.params.get("channel") == CHANNEL
    ]
    # The same message (its blocks carry the request's and run's ids) in one place.
    posts = Counter(
        (str(c.params.get("channel")), str(c.params.get("thread_ts")), str(c.params.get("blocks")))
        for c in slack.calls_to("chat.postMessage", ok=True)
    )
    return SlackOutage(
        side=side.read_text().splitlines(),
        statuses=len(_status_posts(slack)),
        asked=len(asked),
        final_threads=len({str(c.params.get("thread_ts")) for c in _final_posts(slack)}),
        finals=len(_final_posts(slack)),
        doubled=[key for key, n in posts.items() if n > 1],
        seen_after=seen_after,
    )


async def test_a_20_s_slack_outage_loses_no_post_and_repeats_none(tmp_path: Path) -> None:
    result = await slack_outage(tmp_path)
    assert result.side == ["once"] * RUNS, "each approved command runs exactly once"
    assert result.statuses == RUNS
    assert result.asked == RUNS
    assert result.final_threads == RUNS
    assert result.finals == RUNS
    assert result.doubled == []
