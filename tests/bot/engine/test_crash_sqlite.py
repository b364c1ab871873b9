"""Kill -9 of the real bot (one process, SQLite) mid-run and while a run waits for approval: nothing is lost.

The bot runs as `massgen-bot serve` subprocesses against the Slack emulator and the loopback
provider (both in this test's process, so they outlive the bot and count every call). After the
restart the engine recovers the run's workflow and its step resumes the run from the run store;
the approval message posted before the crash is the one whose click (after the restart) resumes it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from bot.playground.emulator import SlackEmulator
from bot.playground.payloads import block_actions, encode_interactive, signed_request
from bot.render import ids
from tests.bot.engine.procs import BotProcess, bot_env
from tests.bot.harness import APPROVER, CHANNEL, SECRET, TOKEN, team_yaml
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

SLOW = 3.0  # seconds per reply of the second agent: it is mid-turn when the bot is killed


class _Counting:
    """The protocol agent; a2 (claude-test) answers slowly; counts each reply's tool per model."""

    def __init__(self) -> None:
        self.replies: Counter[tuple[str, str]] = Counter()

    def __call__(self, request: ProviderRequest) -> Reply:
        reply = protocol_agent(request)
        for name, _ in reply.tool_calls:
            self.replies[(request.model, name)] += 1
        if request.model == "claude-test":
            return dataclasses.replace(reply, delay=SLOW)
        return reply


def _final_posts(slack: SlackEmulator) -> list[Any]:
    return [
        c
        for c in slack.calls_to("chat.postMessage", ok=True)
        if "final answer" in str(c.params.get("text")).lower()
        or "Final answer" in str(c.params.get("blocks"))
    ]


def _status_posts(slack: SlackEmulator) -> list[Any]:
    """Top-level posts in the channel: one status message per run."""
    return [
        c
        for c in slack.calls_to("chat.postMessage", ok=True)
        if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
    ]


def _duplicated_posts(slack: SlackEmulator) -> list[str]:
    texts = Counter(
        (str(c.params.get("thread_ts")), str(c.params.get("text")))
        for c in slack.calls_to("chat.postMessage", ok=True)
    )
    return [text for (_, text), n in texts.items() if n > 1]


async def test_a_run_survives_sigterm_then_kill_9_mid_turns_and_posts_once(tmp_path: Path) -> None:
    async with (
        SlackEmulator(bot_token=TOKEN, allowed_mentions={"U0USER", APPROVER}) as slack,
        ProviderServer(counting := _Counting()) as provider,
    ):
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=2))
        env = bot_env(slack.api_url, f"sqlite:///{tmp_path / 'bot.db'}", MASSGEN_SHUTDOWN_GRACE="0.5")
        args = ["serve", "--team", str(team)]

        def slow_calls() -> int:
            return sum(r.model == "claude-test" for r in provider.requests)

        first = await BotProcess(args, env, tmp_path).start()
        try:
            assert await first.command("write release notes") == 200
            # a1 has answered (it votes now); a2's first turn is in flight
            await slack.wait_for(lambda: counting.replies[("gpt-test", "new_answer")] == 1, 30)
            await slack.wait_for(lambda: slow_calls() >= 1, 30)
        finally:
            # SIGTERM: the run outlives the grace period, so it is left pending, not cancelled.
            assert await first.stop(within=20) == 0, first.output()
        assert "left pending in the engine" in first.output(tail=0)
        assert not _final_posts(slack), "the run ended before the signal: nothing was tested"
        calls = slow_calls()
        second = await BotProcess(args, env, tmp_path).start()
        try:
            await slack.wait_for(lambda: slow_calls() > calls, 30)  # resumed: a2's turn is redone
        finally:
            await second.kill()
        assert not _final_posts(slack)
        third = await BotProcess(args, env, tmp_path).start()
        try:
            await slack.wait_for(lambda: bool(_final_posts(slack)), 40)
        finally:
            code = await third.stop()
        assert code == 0, third.output()
        assert len(_final_posts(slack)) == 1
        assert len(_status_posts(slack)) == 1, "the status message was posted again"
        assert _duplicated_posts(slack) == []
        # Completed model calls are checkpointed: a1's answer, given before the first stop, is never
        # asked for (paid for) again; a2's turn in flight at each stop is redone, nothing more.
        assert counting.replies[("gpt-test", "new_answer")] == 1, counting.replies
        assert counting.replies[("claude-test", "new_answer")] <= 3, counting.replies
        assert slack.violations == []


def _asks_once(side: Path) -> Any:
    command = f"echo once >> {side}"

    def handler(request: ProviderRequest) -> Reply:
        asked = any(m.role == "assistant" and m.tool_calls for m in request.messages)
        if "run_command" in request.tools and not asked and request.model == "gpt-test":
            return Reply(tool_calls=[("run_command", {"command": command})])
        return protocol_agent(request)

    return handler


def _approval_value(slack: SlackEmulator) -> tuple[str, str] | None:
    """The approval message's request id (its Approve button's value) and ts."""
    for ts, message in dict(slack.messages.get(CHANNEL, {})).items():
        for block in message.get("blocks") or []:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if element.get("action_id") == ids.APPROVE_ONCE:
                    return str(element["value"]), str(ts)
    return None


async def test_a_run_killed_while_waiting_for_approval_resumes_on_the_click_after_restart(
    tmp_path: Path,
) -> None:
    side = tmp_path / "side.txt"
    async with (
        SlackEmulator(bot_token=TOKEN, allowed_mentions={"U0USER", APPROVER}) as slack,
        ProviderServer(_asks_once(side)) as provider,
    ):
        team = tmp_path / "team.yaml"
        extra = "permissions: {policy: human, rules: {ask: ['command(echo *)']}}\n"
        team.write_text(team_yaml(provider, agents=2, extra=extra, approval_timeout=600))
        env = bot_env(slack.api_url, f"sqlite:///{tmp_path / 'bot.db'}")
        args = ["serve", "--team", str(team)]
        first = await BotProcess(args, env, tmp_path).start()
        try:
            assert await first.command("write release notes") == 200
            await slack.wait_for(lambda: _approval_value(slack) is not None, 30)
        finally:
            await first.kill()
        asked = _approval_value(slack)
        assert asked is not None
        request_id, message_ts = asked
        second = await BotProcess(args, env, tmp_path).start()
        try:
            hook = slack.response_url("click-after-restart", channel=CHANNEL, user=APPROVER)
            payload = block_actions(
                ids.APPROVE_ONCE,
                request_id,
                user=APPROVER,
                channel=CHANNEL,
                message_ts=message_ts,
                response_url=hook,
            )
            body = encode_interactive(payload)
            assert await second.post(body, signed_request(body, SECRET)) == 200
            await slack.wait_for(lambda: bool(_final_posts(slack)), 40)
        finally:
            code = await second.stop()
        assert code == 0, second.output()
        assert side.read_text().splitlines() == ["once"], "the approved command must run exactly once"
        approvals = [  # in the run's thread (the approver also gets a DM copy)
            c
            for c in slack.calls_to("chat.postMessage", ok=True)
            if ids.APPROVE_ONCE in str(c.params.get("blocks")) and c.params.get("channel") == CHANNEL
        ]
        assert len(approvals) == 1, [(c.params.get("channel"), c.params.get("thread_ts")) for c in approvals]
        assert len(_final_posts(slack)) == 1
        assert len(_status_posts(slack)) == 1
        assert _duplicated_posts(slack) == []
