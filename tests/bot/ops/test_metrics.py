"""`GET /metrics` after a real run: every family is fed by the code path it describes."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from approvals import Ask
from approvals.models import Approvers
from approvals.permissions import Action, Decision, action_digest
from bot.app import build_health_app
from bot.approval_ui import ThreadApprovalPort
from bot.render import ids
from tests.bot.harness import APPROVER, CHANNEL, REQUESTER, BotHarness, bot_harness
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import Handler, ProviderRequest, Reply

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def provider_calls(samples: Samples, outcome: str, status: str | None = None) -> float:
    return sum(
        v
        for (name, labels), v in samples.items()
        if name == "massgen_provider_calls_total"
        and ("outcome", outcome) in labels
        and (status is None or ("status", status) in labels)
    )


async def scrape(bot: BotHarness) -> Samples:
    response = await bot.http.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return parse(await response.text())


async def ask(bot: BotHarness, command: str) -> str:
    root = bot.services.outbox.post(CHANNEL, text="a run")
    port = ThreadApprovalPort(bot.services.approvals, CHANNEL, root)
    decision = Decision(verdict="ask", resolved="ask", risk="high", layer="rule", reason="pushes code")
    request = await port.request(
        Ask(
            run_id="run-metrics",
            agent_id="a1",
            requester=REQUESTER,
            action=Action(kind="command", target=command),
            digest=action_digest("run_command", {"command": command}),
            decision=decision,
            approvers=Approvers(users=frozenset({APPROVER})),
            timeout=timedelta(seconds=60),
        )
    )
    return request.id


def one_provider_error_then_the_agent() -> Handler:
    failed: list[str] = []

    def handler(request: ProviderRequest) -> Reply:
        if not failed:
            failed.append(request.model)
            return Reply(error=500)
        return protocol_agent(request)

    return handler


async def test_a_real_run_feeds_every_metric(tmp_path: Path) -> None:
    async with bot_harness(tmp_path, handler=one_provider_error_then_the_agent()) as bot:
        before = await scrape(bot)
        bot.slack.inject("chat.postMessage", retry_after=0.05)  # one 429
        assert (await bot.command("write a haiku about flaky tests"))[0] == 200
        await bot.settle()
        assert (await bot.services.runs.history.recent())[0].state == "finished"
        decided = await ask(bot, "git push origin main")
        waiting = await ask(bot, "terraform apply")
        await bot.click(ids.APPROVE_ONCE, decided, user=APPROVER)
        await asyncio.wait_for(bot.services.approvals.wait(decided), 5)
        await bot.settle()
        after = await scrape(bot)

    assert value(after, "massgen_runs", state="finished") == 1
    assert value(after, "massgen_runs", state="running") == 0
    assert value(after, "massgen_runs_started_total") == 1
    assert value(after, "massgen_runs_ended_total", outcome="finished") == 1
    assert value(after, "massgen_tokens_total", direction="input") > 0
    assert value(after, "massgen_tokens_total", direction="output") > 0
    assert value(after, "massgen_cost_usd_total") >= 0
    # Model calls: counted per attempt at the one retry loop (process-wide, so compare with before).
    ok = provider_calls(after, "ok") - provider_calls(before, "ok")
    assert ok == len(bot.provider.requests) - 1  # every request but the one that failed
    assert provider_calls(after, "retried", "500") - provider_calls(before, "retried", "500") == 1
    # Slack: calls by method from the outbox, and the 429 it waited out.
    assert value(after, "massgen_slack_calls_total", method="chat.postMessage") >= 2
    assert value(after, "massgen_slack_rate_limited_total") == 1
    # Approvals: both requested, one approved with its latency observed, one still pending.
    assert value(after, "massgen_approvals_total", event="requested") == 2
    assert value(after, "massgen_approvals_total", event="approved") == 1
    assert value(after, "massgen_approval_decision_seconds_count", outcome="approved") == 1
    assert value(after, "massgen_approvals_pending") == 1
    assert value(after, "massgen_approval_oldest_pending_seconds") > 0
    assert waiting
    assert value(after, "process_resident_memory_bytes") > 0  # the process itself, for dashboards


async def test_socket_mode_health_server_serves_metrics_and_readiness_checks(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        bot.services.ready_checks["engine"] = lambda: _answer("engine not launched")
        client: TestClient[Any, Any] = TestClient(TestServer(build_health_app(bot.services)))
        await client.start_server()
        try:
            assert "massgen_runs" in await (await client.get("/metrics")).text()
            ready = await client.get("/readyz")
            assert ready.status == 503
            assert (await ready.json())["engine"] == "engine not launched"
            bot.services.ready_checks["engine"] = lambda: _answer(None)
            ready = await client.get("/readyz")
            assert ready.status == 200
            assert (await ready.json())["engine"] == "ok"
            bot.services.ready_checks["broken"] = _raises
            ready = await client.get("/readyz")
            assert ready.status == 503
            assert (await ready.json())["broken"] == "RuntimeError: no queue"
        finally:
            await client.close()


async def _answer(problem: str | None) -> str | None:
    return problem


async def _raises() -> str | None:
    raise RuntimeError("no queue")
