"""Scenario harness: the real Bolt app and services against the Slack emulator and the provider server.

`BotHarness` builds everything `massgen-bot serve` builds (through `build_services`/`build_app`),
serves it with aiohttp's test server, and sends what Slack would send: signed slash commands,
button clicks, modal submissions and events. No test lives here; scenario modules import it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from aiohttp.test_utils import TestClient, TestServer

from approvals import Ask
from approvals.models import Approvers
from approvals.permissions import Action, Decision, Risk, action_digest
from bot.app import build_app, build_web_app
from bot.playground.emulator import Call, Limits, SlackEmulator
from bot.playground.payloads import (
    app_mention,
    block_actions,
    encode_form,
    encode_interactive,
    encode_json,
    signed_request,
    slash_command,
    view_submission,
)
from bot.runs.supervisor import ToolsBuilder
from bot.settings import BotSettings
from bot.wiring import OutboxOptions, Services, build_services
from tests.fakes.provider_server import Handler, ProviderServer

SECRET = "test-signing-secret"
TOKEN = "xoxb-test"
APPROVER = "U0APPROVER"
REQUESTER = "U0USER"
INTRUDER = "U0INTRUDER"
CHANNEL = "C0CHAN"


def command_ask(
    command: str = "git push origin main",
    *,
    approvers: Approvers | None = None,
    risk: Risk = "medium",
    reason: str = "pushes",
    rule: str | None = None,
    timeout: float = 60.0,
    run_id: str = "run-test",
) -> Ask:
    """An engine ask for `run_command(command)` by agent a1 of REQUESTER's run (APPROVER decides)."""
    return Ask(
        run_id=run_id,
        agent_id="a1",
        requester=REQUESTER,
        action=Action(kind="command", target=command),
        digest=action_digest("run_command", {"command": command}),
        decision=Decision(verdict="ask", resolved="ask", risk=risk, layer="rule", reason=reason, rule=rule),
        approvers=approvers or Approvers(users=frozenset({APPROVER})),
        timeout=timedelta(seconds=timeout),
    )


# Slack's real budgets with time compressed 50x on both sides (a "minute" lasts 1.2 s), so a pacing
# bug still shows up as a 429 / violation in the emulator while the tests stay fast.
SCALE = 0.02
FAST = OutboxOptions().scaled(SCALE)


def scaled_limits() -> Limits:
    """The emulator's limits on the same compressed clock."""
    return Limits(window=60.0 * SCALE, post_interval=1.0 * SCALE)


def team_yaml(
    provider: ProviderServer,
    *,
    agents: int = 3,
    extra: str = "",
    remind_before: float = 120,
    run_timeout: float = 60,
    approval_timeout: float = 30,
) -> str:
    """A team file whose agents talk to the loopback provider server through each real SDK."""
    backends = [
        f"{{type: openai, model: gpt-test, base_url: '{provider.openai_base_url}', api_key: k}}",
        f"{{type: claude, model: claude-test, base_url: '{provider.anthropic_base_url}', api_key: k}}",
        f"{{type: chatcompletion, model: chat-test, base_url: '{provider.openai_base_url}', api_key: k}}",
    ]
    lines = ["agents:"]
    for i in range(agents):
        lines += [f"  - id: a{i + 1}", f"    backend: {backends[i % 3]}"]
    remind = remind_before
    lines += [
        f"orchestrator: {{timeout_seconds: {run_timeout}, budget_usd: 5.0, "
        "final_answer_strategy: winner_reuse}",
        f"approvals: {{approvers: [{APPROVER}], timeout_seconds: {approval_timeout}, "
        f"remind_before_seconds: {remind}}}",
        "sandbox: none",
    ]
    return "\n".join(lines) + "\n" + extra


@dataclass
class BotHarness:
    """One bot process under test, with its Slack and its model providers."""

    slack: SlackEmulator
    provider: ProviderServer
    services: Services
    http: TestClient[Any, Any]

    async def post(self, body: bytes, *, headers: dict[str, str] | None = None) -> tuple[int, str]:
        response = await self.http.post(
            "/slack/events", data=body, headers=headers or signed_request(body, SECRET)
        )
        return response.status, await response.text()

    async def command(self, text: str, *, user: str = REQUESTER, channel: str = CHANNEL) -> tuple[int, str]:
        hook = self.slack.response_url(f"cmd-{len(self.slack.hooks) + 1}", channel=channel, user=user)
        return await self.post(
            encode_form(slash_command(text, user=user, channel=channel, response_url=hook))
        )

    async def click(
        self, action_id: str, value: str, *, user: str, channel: str = CHANNEL
    ) -> tuple[int, str]:
        hook = self.slack.response_url(f"click-{len(self.slack.hooks) + 1}", channel=channel, user=user)
        payload = block_actions(action_id, value, user=user, channel=channel, response_url=hook)
        return await self.post(encode_interactive(payload))

    async def submit(self, callback_id: str, values: dict[str, Any], *, user: str, metadata: str) -> int:
        body = encode_interactive(view_submission(callback_id, values, user=user, private_metadata=metadata))
        return (await self.post(body))[0]

    async def mention(self, text: str, *, user: str = REQUESTER, thread_ts: str | None = None) -> int:
        return (await self.post(encode_json(app_mention(text, user=user, thread_ts=thread_ts))))[0]

    def posts(self, *, thread: str | None = None) -> list[Call]:
        calls = self.slack.calls_to("chat.postMessage", ok=True)
        return [c for c in calls if thread is None or c.params.get("thread_ts") == thread]

    def ephemerals(self, user: str) -> list[str]:
        """What only `user` was shown: chat.postEphemeral and ephemeral response_url replies."""
        return [str(e.get("text")) for e in self.slack.ephemerals if e.get("user") == user]

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        await self.slack.wait_for(predicate, timeout)

    async def settle(self, timeout: float = 20.0) -> None:
        """Until every run and background task has ended and the outbox has sent everything."""
        await self.services.tasks.wait_idle(within=timeout)
        await self.services.outbox.flush()
        # A give-up met while flushing starts a task (the requester's notice) that posts in turn.
        await self.services.tasks.wait_idle(within=timeout)
        await self.services.outbox.flush()


@asynccontextmanager
async def bot_harness(
    tmp_path: Path,
    *,
    handler: Handler | None = None,
    agents: int = 3,
    team_extra: str = "",
    tools: ToolsBuilder | Literal["real", "none"] = "none",
    limits: Limits | None = None,
    options: OutboxOptions = FAST,
    remind_before: float = 120,
    run_timeout: float = 60,
    approval_timeout: float = 30,
    database_url: str | None = None,
    state_dir: Path | None = None,
    slack: SlackEmulator | None = None,
    grace: float = 5.0,
) -> AsyncIterator[BotHarness]:
    """Start the emulator (or reuse `slack`: a restart), the provider server and the bot; close at exit."""
    own = slack is None
    emulator = slack or SlackEmulator(
        bot_token=TOKEN, allowed_mentions={APPROVER, REQUESTER}, limits=limits or scaled_limits()
    )
    async with AsyncExitStack() as stack:
        if own:
            await stack.enter_async_context(emulator)
        provider = await stack.enter_async_context(ProviderServer(handler))
        team = tmp_path / "team.yaml"
        text = team_yaml(
            provider,
            agents=agents,
            extra=team_extra,
            remind_before=remind_before,
            run_timeout=run_timeout,
            approval_timeout=approval_timeout,
        )
        team.write_text(text)
        settings = BotSettings.with_values(
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=emulator.api_url,
            DATABASE_URL=database_url or f"sqlite:///{tmp_path / 'bot.db'}",
            MASSGEN_TEAMS_DIR=tmp_path / "teams",
            MASSGEN_STATE_DIR=state_dir,
            MASSGEN_DB_UPGRADE="auto",  # PostgreSQL too: each test's database is new
            MASSGEN_ENGINE_POLL=0.05,
        )
        services = await build_services(settings, team_file=team, tools=tools, outbox=options)
        app = build_app(services)
        http: TestClient[Any, Any] = TestClient(TestServer(build_web_app(app, services)))
        await http.start_server()
        try:
            yield BotHarness(slack=emulator, provider=provider, services=services, http=http)
        finally:
            await http.close()
            await services.close(grace=grace)
        emulator.assert_clean()
