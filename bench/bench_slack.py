"""The Slack bot under load: ack latency, Slack calls per run, status freshness, click-to-resume.

Everything `massgen-bot serve` builds runs in-process (Bolt app over aiohttp, outbox, SQLite, the
approval service), against the Slack emulator and the loopback provider server. Fifty runs stay
active (model replies are held until the probes end) in five channels while the bench sends slash commands and
button clicks. Slack's limits are enforced on a clock compressed `SCALE` times on both sides (the
emulator's windows and the outbox's budgets), so the figures reflect real pacing in less time.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from approvals import Ask
from approvals.models import Approvers
from approvals.permissions import Action, Decision, action_digest
from bot.app import build_app, build_web_app
from bot.approval_ui import ThreadApprovalPort
from bot.playground.emulator import Limits, SlackEmulator
from bot.playground.payloads import (
    block_actions,
    encode_form,
    encode_interactive,
    signed_request,
    slash_command,
)
from bot.render import ids
from bot.settings import BotSettings
from bot.wiring import OutboxOptions, build_services
from orchestrator.events import RunEvent
from tests.bot.harness import APPROVER, INTRUDER, SECRET, TOKEN, team_yaml
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

SCALE = 0.1  # a Slack "minute" lasts 6 s
RUNS = 50
CHANNELS = [f"C0LOAD{i}" for i in range(5)]
MODEL_DELAY = 0.5  # seconds per model reply once released
PROBES = 40  # status commands + button clicks, each answered with an ephemeral (Tier 4: 100/min)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _ms(values: list[float]) -> str:
    p50, p99 = _pct(values, 0.5) * 1000, _pct(values, 0.99) * 1000
    return f"p50 {p50:7.1f} ms   p99 {p99:7.1f} ms   (n={len(values)})"


class _Gate:
    """Model replies wait until the probes are done, so every run is active while we measure."""

    def __init__(self) -> None:
        self.open = asyncio.Event()

    async def handler(self, request: ProviderRequest) -> Reply:
        await self.open.wait()
        reply = protocol_agent(request)
        reply.delay = MODEL_DELAY
        return reply


class _Freshness:
    """Event time per run, to match against the next status update Slack receives."""

    def __init__(self) -> None:
        self.events: dict[str, list[float]] = defaultdict(list)

    def observe(self, run_id: str, event: RunEvent) -> None:
        if event.kind not in {"text_delta", "final_delta", "tool_call"}:
            self.events[run_id].append(time.monotonic())

    def lags(self, updates: dict[str, list[float]]) -> list[float]:
        out = []
        for run_id, times in self.events.items():
            sent = sorted(updates.get(run_id, []))
            for t in times:
                later = [u for u in sent if u >= t]
                if later:
                    out.append(later[0] - t)
        return out


async def _timed_post(http: TestClient[Any, Any], body: bytes) -> float:
    started = time.perf_counter()
    response = await http.post("/slack/events", data=body, headers=signed_request(body, SECRET))
    await response.read()
    assert response.status == 200, response.status
    return time.perf_counter() - started


async def _click_to_resume(services: Any, http: TestClient[Any, Any], channel: str) -> float:
    root = services.outbox.post(channel, text="bench ask")
    port = ThreadApprovalPort(services.approvals, channel, root)
    request = await port.request(
        Ask(
            run_id="run-bench",
            agent_id="a1",
            requester="U0USER",
            action=Action(kind="command", target="make deploy"),
            digest=action_digest("run_command", {"command": "make deploy"}),
            decision=Decision(verdict="ask", resolved="ask", risk="medium", layer="rule", reason="deploys"),
            approvers=Approvers(users=frozenset({APPROVER})),
            timeout=timedelta(minutes=5),
        )
    )
    waiter = asyncio.create_task(services.approvals.wait(request.id))
    await asyncio.sleep(0)
    body = encode_interactive(block_actions(ids.APPROVE_ONCE, request.id, user=APPROVER, channel=channel))
    started = time.perf_counter()
    await http.post("/slack/events", data=body, headers=signed_request(body, SECRET))
    await waiter
    return time.perf_counter() - started


async def _bench(root: Path) -> None:
    limits = Limits(window=60.0 * SCALE, post_interval=1.0 * SCALE)
    freshness = _Freshness()
    emulator = SlackEmulator(bot_token=TOKEN, limits=limits, allowed_mentions={APPROVER, "U0USER"})
    gate = _Gate()
    async with emulator as slack, ProviderServer(gate.handler) as provider:
        team = root / "team.yaml"
        team.write_text(team_yaml(provider))
        settings = BotSettings.with_values(
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=slack.api_url,
            DATABASE_URL=f"sqlite:///{root / 'bench.db'}",
        )
        services = await build_services(
            settings,
            team_file=team,
            tools="none",
            outbox=OutboxOptions().scaled(SCALE),
            observe=freshness.observe,
        )
        http: TestClient[Any, Any] = TestClient(TestServer(build_web_app(build_app(services), services)))
        await http.start_server()
        gc.collect()  # as `massgen-bot serve` does once it is wired (bot/cli/serve.py)
        gc.freeze()
        try:
            started = time.perf_counter()
            start_acks = [
                await _timed_post(
                    http, encode_form(slash_command(f"task {i}", channel=CHANNELS[i % len(CHANNELS)]))
                )
                for i in range(RUNS)
            ]
            # The runs start in supervised tasks; poll with a deadline until all are active.
            deadline = time.monotonic() + 30
            while services.runs.supervisor.started < RUNS and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            active_at_probe = len(services.runs.supervisor.active_runs())
            command_acks, click_acks, resumes = [], [], []
            for i in range(PROBES):
                active_at_probe = min(active_at_probe, len(services.runs.supervisor.active_runs()))
                channel = CHANNELS[i % len(CHANNELS)]
                command_acks.append(
                    await _timed_post(http, encode_form(slash_command("status", channel=channel)))
                )
                run = (
                    services.runs.supervisor.active_runs()[0].handle.run_id
                    if services.runs.supervisor.active_runs()
                    else "run-x"
                )
                click = encode_interactive(block_actions(ids.RUN_CANCEL, run, user=INTRUDER, channel=channel))
                click_acks.append(await _timed_post(http, click))
                if i % 5 == 0:
                    resumes.append(await _click_to_resume(services, http, channel))
            gate.open.set()
            await services.tasks.wait_idle(within=300)
            await services.outbox.flush()
            wall = time.perf_counter() - started
            await _report(
                slack,
                services,
                freshness,
                wall,
                active_at_probe,
                start_acks,
                command_acks,
                click_acks,
                resumes,
            )
            await _few_runs(slack, services, http, freshness)
        finally:
            await http.close()
            await services.close(grace=10)


async def _update_times(slack: SlackEmulator, services: Any) -> dict[str, list[float]]:
    """When Slack received each status-message update, per run id."""
    runs = await services.runs.history.recent(limit=RUNS + 50)
    roots = {r.thread_ts: r.run_id for r in runs}
    updates: dict[str, list[float]] = defaultdict(list)
    for call in slack.calls_to("chat.update", ok=True):
        if call.params.get("ts") in roots:
            updates[roots[call.params["ts"]]].append(call.at)
    return updates


async def _few_runs(
    slack: SlackEmulator, services: Any, http: TestClient[Any, Any], fresh: _Freshness
) -> None:
    """Freshness when the workspace is not saturated: five runs in one channel."""
    before = set(fresh.events)
    for i in range(5):
        await _timed_post(http, encode_form(slash_command(f"small {i}", channel=CHANNELS[0])))
    await services.tasks.wait_idle(within=120)
    await services.outbox.flush()
    few = _Freshness()
    few.events = defaultdict(list, {k: v for k, v in fresh.events.items() if k not in before})
    lags = few.lags(await _update_times(slack, services))
    print(f"   status freshness, 5 runs   {_ms(lags)}  (compressed clock)")
    print(f"   freshness at real limits   p50 ~{_pct(lags, 0.5) / SCALE:.1f} s with 5 runs")


async def _report(
    slack: SlackEmulator,
    services: Any,
    freshness: _Freshness,
    wall: float,
    active: int,
    start_acks: list[float],
    command_acks: list[float],
    click_acks: list[float],
    resumes: list[float],
) -> None:
    runs = await services.runs.history.recent(limit=RUNS + 10)
    updates = await _update_times(slack, services)
    per_run = [
        c
        for c in slack.calls
        if c.method in {"chat.postMessage", "chat.update"} and c.params.get("channel") in CHANNELS
    ]
    states: dict[str, int] = defaultdict(int)
    for run in runs:
        states[run.state] += 1
    lags = freshness.lags(updates)
    clock = f"Slack limits on a {1 / SCALE:.0f}x compressed clock"
    print(f"   {RUNS} runs in {len(CHANNELS)} channels, {clock}; wall {wall:.1f} s")
    print(f"   runs by state: {dict(states)}; runs active throughout the probes: >= {active}")
    print(f"   ack /massgen <task>        {_ms(start_acks)}")
    print(f"   ack /massgen status (load) {_ms(command_acks)}")
    print(f"   ack button click (load)    {_ms(click_acks)}")
    print(f"   click -> run resumes       {_ms(resumes)}")
    print(f"   status freshness           {_ms(lags)}  (event -> chat.update received; compressed clock)")
    print(f"   Slack calls per run        {len(per_run) / max(1, len(runs)):.1f} (postMessage + update)")
    limited, violations = services.outbox.stats.rate_limited, len(slack.violations)
    print(f"   429s seen by the outbox    {limited}; emulator violations {violations}")
    for problem in slack.violations[:3]:
        print(f"     violation: {problem[:150]}")
    if lags:
        # 50 live runs share one workspace's chat.update budget (Tier 3, ~45/min): that, not the bot,
        # bounds how fresh each status message can be. Real seconds = compressed seconds / SCALE.
        real = statistics.median(lags) / SCALE
        print(f"   freshness at real limits   p50 ~{real:.0f} s with {RUNS} runs sharing Tier 3 chat.update")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-slack-") as tmp:
        asyncio.run(_bench(Path(tmp)))


if __name__ == "__main__":
    main()
