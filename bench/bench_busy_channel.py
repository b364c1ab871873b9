"""A busy channel: 20 runs started together in one channel, at Slack's real rate limits.

What it measures (issue 9, item 8): for each run, the lag from its last model call to its final
answer being visible in Slack (the emulator receiving the `chat.postMessage`), the posts each run
makes, and the 429s. The emulator enforces Slack's real limits on the real clock (one post per
second per channel with a short burst, Tier 3 `chat.update`), the outbox keeps its production
pacing, and the models are scripted (the MassGen protocol agent) with a seeded 2-8 s latency per
call, so runs end spread over a few seconds, as they would.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from bot.app import build_app, build_web_app
from bot.playground.emulator import Limits, SlackEmulator
from bot.playground.payloads import encode_form, signed_request, slash_command
from bot.settings import BotSettings
from bot.wiring import OutboxOptions, build_services
from orchestrator.events import RunEvent
from tests.bot.harness import APPROVER, REQUESTER, SECRET, TOKEN, team_yaml
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

RUNS = 20
CHANNEL = "C0BUSY"
LATENCY = (2.0, 8.0)  # seconds per model call, uniform, seeded (a frontier model writing an answer)
GOAL_P99 = 30.0
_MODEL_EVENTS = frozenset({"usage", "text_delta", "final_delta", "answer", "vote"})


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class _LastModelCall:
    """When each run last heard from a model (the event that follows a model call's reply)."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    def observe(self, run_id: str, event: RunEvent) -> None:
        if event.kind in _MODEL_EVENTS or (event.kind == "finished" and run_id not in self.at):
            self.at[run_id] = time.monotonic()


def _scripted(seed: int) -> Any:
    rng = random.Random(seed)

    def handler(request: ProviderRequest) -> Reply:
        reply = protocol_agent(request)
        reply.delay = rng.uniform(*LATENCY)
        return reply

    return handler


async def _bench(root: Path) -> None:
    last_call = _LastModelCall()
    emulator = SlackEmulator(bot_token=TOKEN, limits=Limits(), allowed_mentions={APPROVER, REQUESTER})
    async with emulator as slack, ProviderServer(_scripted(9)) as provider:
        team = root / "team.yaml"
        team.write_text(team_yaml(provider, run_timeout=300))
        settings = BotSettings.with_values(
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=slack.api_url,
            DATABASE_URL=f"sqlite:///{root / 'bench.db'}",
        )
        services = await build_services(
            settings, team_file=team, tools="none", outbox=OutboxOptions(), observe=last_call.observe
        )
        http: TestClient[Any, Any] = TestClient(TestServer(build_web_app(build_app(services), services)))
        await http.start_server()
        try:
            started = time.perf_counter()
            for i in range(RUNS):
                body = encode_form(slash_command(f"busy task {i}", channel=CHANNEL))
                response = await http.post("/slack/events", data=body, headers=signed_request(body, SECRET))
                assert response.status == 200, response.status
            await services.tasks.wait_idle(within=600)
            await services.outbox.flush()
            await _report(slack, services, last_call, time.perf_counter() - started)
        finally:
            await http.close()
            await services.close(grace=10)


async def _report(slack: SlackEmulator, services: Any, last_call: _LastModelCall, wall: float) -> None:
    runs = await services.runs.history.recent(limit=RUNS + 5)
    by_root = {r.thread_ts: r.run_id for r in runs}
    finals: dict[str, float] = {}
    posts: dict[str, int] = defaultdict(int)
    for call in slack.calls_to("chat.postMessage", ok=True):
        root = call.params.get("thread_ts")
        if root is None:
            continue  # a root status message: counted below, one per run
        run_id = by_root.get(root)
        if run_id is None:
            continue
        posts[run_id] += 1
        if str(call.params.get("text", "")).startswith("Final answer") and run_id not in finals:
            finals[run_id] = call.at
    lags = [finals[r] - last_call.at[r] for r in finals if r in last_call.at]
    states: dict[str, int] = defaultdict(int)
    for run in runs:
        states[run.state] += 1
    per_run = [1 + posts[r.run_id] for r in runs]
    updates = len(slack.calls_to("chat.update", ok=True))
    p50, p99, worst = _pct(lags, 0.5), _pct(lags, 0.99), max(lags, default=float("nan"))
    print(f"   {RUNS} runs started together in one channel, Slack's real limits; wall {wall:.1f} s")
    print(f"   runs by state: {dict(states)}; final answers seen {len(finals)}/{RUNS}")
    print(f"   last model call -> final answer in Slack: p50 {p50:.1f} s  p99 {p99:.1f} s  max {worst:.1f} s")
    print(
        f"   posts per run: {sum(per_run) / max(1, len(per_run)):.1f} "
        f"(max {max(per_run, default=0)}; root + progress + final); chat.update total {updates}"
    )
    limited, violations = services.outbox.stats.rate_limited, len(slack.violations)
    print(f"   429s seen by the outbox {limited}; emulator violations {violations}")
    verdict = "met" if p99 <= GOAL_P99 and limited == 0 and violations == 0 else "MISSED"
    print(f"   goal p99 <= {GOAL_P99:.0f} s with zero 429s: {verdict}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-busy-") as tmp:
        asyncio.run(_bench(Path(tmp)))


if __name__ == "__main__":
    main()
