"""`massgen-bot run` under `MASSGEN_PROVIDER_LIMITS`: a real process, held by its own in-process limiter.

The proof is at the provider: the loopback server's request arrival times (no window of the period
holds more than the limit) and the requests it is answering at once (a scripted latency makes the
calls in flight observable). The same runs with the limit on another provider show the run would
break both without it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.bot.cli.test_run import massgen_bot
from tests.bot.engine.test_limits import most_in_a_window
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

LATENCY = 0.3  # seconds the provider takes per reply (the concurrency tests)


def openai_team(tmp_path: Path, server: ProviderServer, agents: int = 3) -> Path:
    """`agents` agents, all on the OpenAI Responses API (the `openai` provider)."""
    backend = f"{{type: openai, model: gpt-4o-mini, base_url: '{server.openai_base_url}', api_key: k}}"
    path = tmp_path / "team.yaml"
    lines = [f"  - id: a{i}\n    backend: {backend}\n" for i in range(agents)]
    path.write_text("agents:\n" + "".join(lines))
    return path


class InFlight:
    """The protocol agent, each reply after `LATENCY`; counts the requests being answered at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    async def __call__(self, request: ProviderRequest) -> Reply:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(LATENCY)  # the provider's scripted latency, not a test wait
        finally:
            self.now -= 1
        return protocol_agent(request)


async def _run(tmp_path: Path, server: ProviderServer) -> None:
    code, _, err = await massgen_bot("--json", "--team", str(openai_team(tmp_path, server)), "say hello")
    assert code == 0, err


@pytest.mark.parametrize(("limits", "limited"), [("openai=2/1s", True), ("chatcompletion=2/1s", False)])
async def test_a_rate_limit_holds_every_window_of_the_run_s_requests(
    limits: str, limited: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MASSGEN_PROVIDER_LIMITS", limits)
    async with ProviderServer() as server:
        await _run(tmp_path, server)
        times = [r.received_at for r in server.requests]
    assert len(times) > 4  # more than two windows' worth: the limit had to hold some back
    assert all(r.api == "responses" for r in server.requests)
    if limited:
        assert most_in_a_window(times, 1.0) <= 2
    else:  # the limit is another provider's: this run's requests are not held
        assert most_in_a_window(times, 1.0) > 2


@pytest.mark.parametrize(
    ("limits", "limited"), [("openai.concurrent=1", True), ("anthropic.concurrent=1", False)]
)
async def test_a_concurrency_limit_holds_the_calls_in_flight(
    limits: str, limited: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MASSGEN_PROVIDER_LIMITS", limits)
    handler = InFlight()
    async with ProviderServer(handler) as server:
        await _run(tmp_path, server)
        assert len(server.requests) > 4
    if limited:
        assert handler.most == 1
    else:  # the three agents' first answers are asked for at once
        assert handler.most > 1


def test_the_limited_cli_never_loads_the_engine() -> None:
    """The CLI's limiter is the orchestrator's: its model factory imports no DBOS (start-up is measured)."""
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from bot.cli.run import _models\n"
        "from bot.settings import BotSettings\n"
        "settings = BotSettings.with_values(MASSGEN_PROVIDER_LIMITS='openai=2/1s, openai.concurrent=1')\n"
        "print(asyncio.run(_models(settings, None)) is not None, 'dbos' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]
