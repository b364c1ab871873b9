"""Socket Mode: the same listeners through the emulator's websocket stand-in for apps.connections.open."""

from __future__ import annotations

import asyncio
import socket
from datetime import timedelta
from pathlib import Path

import aiohttp
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

from approvals import Ask
from approvals.models import Approvers
from approvals.permissions import Action, Decision, action_digest
from bot.app import build_app
from bot.approval_ui import ThreadApprovalPort
from bot.playground.payloads import block_actions, slash_command
from bot.render import ids
from tests.bot.harness import APPROVER, CHANNEL, REQUESTER, bot_harness


async def test_socket_mode_serves_commands_and_approval_clicks(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        handler = AsyncSocketModeHandler(build_app(bot.services), app_token=bot.slack.app_token)
        await handler.connect_async()
        try:
            ack = await bot.slack.socket_send("slash_commands", slash_command("help"))
            assert "/massgen" in str(ack)
            await bot.slack.socket_send("slash_commands", slash_command("summarise the logs"))
            await bot.settle()
            run = (await bot.services.runs.history.recent())[0]
            assert (run.state, run.requester) == ("finished", REQUESTER)

            root = bot.services.outbox.post(CHANNEL, text="a run")
            port = ThreadApprovalPort(bot.services.approvals, CHANNEL, root)
            request = await port.request(
                Ask(
                    run_id="run-socket",
                    agent_id="a1",
                    requester=REQUESTER,
                    action=Action(kind="command", target="make deploy"),
                    digest=action_digest("run_command", {"command": "make deploy"}),
                    decision=Decision(
                        verdict="ask", resolved="ask", risk="medium", layer="rule", reason="deploys"
                    ),
                    approvers=Approvers(users=frozenset({APPROVER})),
                    timeout=timedelta(seconds=30),
                )
            )
            await bot.slack.socket_send(
                "interactive", block_actions(ids.APPROVE_ONCE, request.id, user=APPROVER)
            )
            decided = await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)
            assert (decided.status, decided.decided_by) == ("approved", APPROVER)
            assert bot.slack.calls_to("apps.connections.open", ok=True)
        finally:
            await handler.close_async()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_socket_subcommand_connects_serves_and_drains(tmp_path: Path) -> None:
    """`massgen-bot socket`'s coroutine: connect through apps.connections.open, serve, stop cleanly."""
    from bot.cli.serve import serve
    from bot.playground.emulator import SlackEmulator
    from bot.settings import BotSettings
    from tests.bot.harness import SECRET, TOKEN, team_yaml
    from tests.fakes.provider_server import ProviderServer

    async with (
        SlackEmulator(bot_token=TOKEN, allowed_mentions={REQUESTER}) as slack,
        ProviderServer() as provider,
    ):
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=2))  # real Slack pacing: ~1 post/s
        settings = BotSettings.with_values(
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_APP_TOKEN=slack.app_token,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=slack.api_url,
            DATABASE_URL=f"sqlite:///{tmp_path / 'bot.db'}",
            MASSGEN_HOST="127.0.0.1",
        )
        ready, stop = asyncio.Event(), asyncio.Event()
        port = _free_port()
        server = asyncio.create_task(
            serve(settings, mode="socket", team_file=team, port=port, ready=ready, stop=stop)
        )
        await asyncio.wait_for(ready.wait(), 20)
        # Socket Mode has no Slack HTTP listener, but health checks (Docker, Kubernetes) still get one.
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
                assert (await response.json())["slack_auth"] == "ok"
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert (response.status, (await response.json())["database"]) == (200, "ok")
            async with http.post(f"http://127.0.0.1:{port}/slack/events", data=b"{}") as response:
                assert response.status in (404, 405)  # only health checks are served here
        ack = await slack.socket_send("slash_commands", slash_command("x" * 12_001))
        assert "limit is 12,000" in str(ack)
        await slack.socket_send("slash_commands", slash_command("draft the changelog"))
        await slack.wait_for(
            lambda: any(
                "Final answer" in str(c.params.get("text"))
                for c in slack.calls_to("chat.postMessage", ok=True)
            ),
            20,
        )
        stop.set()
        assert await asyncio.wait_for(server, 20) == 0
        assert slack.violations == []
