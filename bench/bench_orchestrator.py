"""Orchestrator figures: overhead, concurrency, calls and prompt tokens per run, CLI and bot start-up.

Printed, not asserted (the tests assert behaviour). MassGen reference for the same protocol on the
same scripted server: 27.9k prompt tokens for 3 agents, 43.5k for 5 (target: at most a third).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from orchestrator import start_run
from orchestrator.config.team import AgentConfig, BackendConfig, TeamConfig
from orchestrator.events import RunEvent
from orchestrator.testing import Request, ScriptedModels, Turn, ended, protocol, scripted_team

MASSGEN_PROMPT_TOKENS = {3: 27_900, 5: 43_500}
ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def overhead(runs: int = 200, agents: int = 3) -> None:
    """Zero-latency models: what coordination itself costs."""
    durations: list[float] = []
    events = 0
    for _ in range(runs):
        seen: list[RunEvent] = []
        started = time.perf_counter()
        handle = await start_run(
            scripted_team(agents), "task", models=ScriptedModels(), subscribers=[seen.append]
        )
        await ended(handle)
        durations.append(time.perf_counter() - started)
        events += len(seen)
    per_run = statistics.median(durations)
    print(f"overhead, {agents} agents, zero-latency models, {runs} runs:")
    print(f"  per run: median {per_run * 1e3:.2f} ms, p99 {pct(durations, 0.99) * 1e3:.2f} ms")
    print(f"  per event: {sum(durations) / events * 1e6:.1f} µs ({events / runs:.0f} events per run)")


def delayed(delay: float):  # type: ignore[no-untyped-def]
    def script(request: Request) -> Turn:
        turn = protocol(request)
        return Turn(text=turn.text, calls=turn.calls, delay=delay)

    return script


async def _concurrent_runs(runs: int, agents: int, delay: float) -> list[str]:
    handles = [
        await start_run(scripted_team(agents), f"task {i}", models=ScriptedModels(then=delayed(delay)))
        for i in range(runs)
    ]
    return [r.kind for r in await asyncio.gather(*(ended(h) for h in handles))]


async def concurrent(runs: int = 100, agents: int = 3, delay: float = 0.02) -> None:
    """Many runs in one process, each model call taking `delay` seconds: wall time and loop lag."""
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            before = loop.time()
            await asyncio.sleep(0.005)
            lags.append(loop.time() - before - 0.005)

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    kinds = await _concurrent_runs(runs, agents, delay)
    wall = time.perf_counter() - started
    stop.set()
    await tick
    print(f"{runs} concurrent {agents}-agent runs, {delay * 1e3:.0f} ms per model call:")
    print(
        f"  wall {wall:.2f} s ({kinds.count('finished')}/{runs} finished; serial ≥ {runs * 3 * delay:.1f} s)"
    )
    print(f"  event-loop lag p50 {pct(lags, 0.5) * 1e3:.2f} ms, p99 {pct(lags, 0.99) * 1e3:.2f} ms")


async def memory(runs: int = 100, agents: int = 3, delay: float = 0.02) -> None:
    """Memory of the same load, measured in a separate pass (tracemalloc slows the loop)."""
    gc.collect()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    await _concurrent_runs(runs, agents, delay)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    print(f"  memory per run: {peak / runs / 1024:.0f} KiB (tracemalloc peak / runs)")
    print(f"  peak RSS growth: {rss_growth / runs:.0f} KiB per run")


async def growth() -> None:
    """Model calls and prompt tokens (≈4 chars per token) per converged run as the team grows."""
    print("calls and prompt tokens per converged run (scripted models):")
    for agents in range(2, 9):
        models = ScriptedModels()
        handle = await start_run(scripted_team(agents), "fix the flaky test in billing", models=models)
        result = await ended(handle)
        tokens = getattr(result, "input_tokens", 0)
        massgen = MASSGEN_PROMPT_TOKENS.get(agents)
        ratio = f" = {tokens / massgen:.2f} × MassGen's {massgen / 1000:.1f}k" if massgen else ""
        print(f"  N={agents}: {models.calls} calls (2N+1 = {2 * agents + 1}), {tokens} prompt tokens{ratio}")


async def loopback_tokens() -> None:
    """The same through the real SDKs against the loopback server, which counts prompt tokens itself."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.provider_server import ProviderServer

    print("prompt tokens per converged run through the SDKs (loopback server's count):")
    for agents in (3, 5):
        async with ProviderServer() as server:
            team = TeamConfig(
                agents=[
                    AgentConfig(
                        id=f"a{i}",
                        backend=BackendConfig(
                            type="chatcompletion",
                            model=f"m{i}",
                            base_url=server.openai_base_url,
                            api_key="k",  # type: ignore[arg-type]
                        ),
                    )
                    for i in range(agents)
                ]
            )
            handle = await start_run(team, "fix the flaky test in billing")
            await ended(handle)
            tokens = server.prompt_tokens_total
            massgen = MASSGEN_PROMPT_TOKENS[agents]
            print(
                f"  N={agents}: {len(server.requests)} calls, {tokens} prompt tokens "
                f"= {tokens / massgen:.2f} × MassGen's {massgen / 1000:.1f}k"
            )


def readme_team(openai_url: str, anthropic_url: str) -> str:
    """The README's three-backend team (Responses, Messages, Chat Completions) aimed at the loopback."""
    return (
        "agents:\n"
        f"  - {{id: alpha, backend: {{type: openai, model: gpt-4o-mini, base_url: '{openai_url}'}}}}\n"
        f"  - {{id: beta, backend: {{type: claude, model: claude-sonnet-4-5, base_url: '{anthropic_url}'}},"
        " system_message: You are a careful reviewer.}\n"
        f"  - {{id: gamma, backend: {{type: chatcompletion, model: llama3, base_url: '{openai_url}'}}}}\n"
        "sandbox: bwrap\n"
    )


async def cli_startup(samples: int = 3) -> None:
    """`massgen-bot run --json` spawned against the loopback server: seconds to its first model request.

    The team is the README's (three backends, three SDK paths); the keys come from the environment,
    as a user's would, and each run gets a fresh state directory (its SQLite file is created then).
    Measured with our modules' bytecode cached, as any installed package has it, and also as this
    environment is configured: `PYTHONDONTWRITEBYTECODE` makes every module of ours compile from
    source in every process (the SDKs in site-packages are precompiled either way).
    """
    sys.path.insert(0, str(ROOT))
    from tests.fakes.provider_server import ProviderServer

    with tempfile.TemporaryDirectory() as folder:
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = f"{folder}/pycache"
        for label, base in (("bytecode cached", cached), ("as configured", dict(os.environ))):
            firsts: dict[str, list[float]] = {}
            await _cli_run(ProviderServer, folder, base, "warm-up")  # fills the bytecode cache
            for i in range(samples):
                for api, seconds in (await _cli_run(ProviderServer, folder, base, str(i))).items():
                    firsts.setdefault(api, []).append(seconds)
            first = [min(values) for values in zip(*firsts.values(), strict=True)]
            print(
                f"`massgen-bot run --json` start-up to the first model request, {label}, the README's team "
                f"(openai + claude + chatcompletion): median {statistics.median(first):.2f} s"
            )
            each = ", ".join(f"{api} {statistics.median(v):.2f} s" for api, v in sorted(firsts.items()))
            print(f"  each agent's first request (median): {each}")
            print(
                f"  (samples {', '.join(f'{t:.2f}' for t in first)}; load average {os.getloadavg()[0]:.1f})"
            )
        claude = []  # a team of `claude` agents only: `import anthropic` alone is the floor
        for i in range(samples):
            run = await _cli_run(ProviderServer, folder, cached, f"claude-{i}", team=claude_team)
            claude.append(run["messages"])
        print(
            "`massgen-bot run --json` start-up to the first model request, bytecode cached, a team of "
            f"two `claude` agents: median {statistics.median(claude):.2f} s "
            f"(samples {', '.join(f'{t:.2f}' for t in claude)}; load average {os.getloadavg()[0]:.1f})"
        )
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"  peak RSS of the CLI run: {peak_mib:.0f} MiB")


def claude_team(openai_url: str, anthropic_url: str) -> str:
    """Two agents on the Messages API only (one SDK to import)."""
    backend = f"{{type: claude, model: claude-sonnet-4-5, base_url: '{anthropic_url}'}}"
    agents = "".join(f"  - {{id: {name}, backend: {backend}}}\n" for name in ("alpha", "beta"))
    return f"agents:\n{agents}sandbox: bwrap\n"


async def _cli_run(
    server_type: Any, folder: str, base: dict[str, str], name: str, *, team: Any = readme_team
) -> dict[str, float]:
    """One `massgen-bot run --json`: seconds from spawn to each API's first request."""
    async with server_type() as server:
        path = Path(folder) / "team.yaml"
        path.write_text(team(server.openai_base_url, server.anthropic_base_url))
        agents = path.read_text().count("id: ")
        env = {k: v for k, v in base.items() if k not in {"MASSGEN_TEAM", "DATABASE_URL"}}
        env |= {
            "OPENAI_API_KEY": "k",
            "ANTHROPIC_API_KEY": "k",
            "MASSGEN_STATE_DIR": f"{folder}/state-{name}",
        }
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", "--json", "--team", str(path), "task",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, cwd=folder, env=env,
        )  # fmt: skip
        await server.wait_for(requests=agents, timeout=60)  # one per agent
        await process.wait()
        firsts: dict[str, float] = {}
        for request in server.requests:
            firsts.setdefault(request.api, request.received_at - started)
        return firsts


async def bot_startup(samples: int = 10) -> None:
    """The running bot: a signed `/massgen` POST to each agent's first request at the provider.

    The real Bolt app and services (`tests/bot/harness.py`: `build_services`, so the boot warm-up of
    the SDKs and the prebuilt clients included) against the Slack emulator and the loopback
    provider, with the harness's three-backend team (openai + claude + chatcompletion, the README
    team's SDK paths) and the real tools. One run at a time; each ends before the next command.
    """
    sys.path.insert(0, str(ROOT))
    from tests.bot.harness import bot_harness

    firsts: dict[str, list[float]] = {}
    logging.disable(logging.WARNING)  # the harness team's `sandbox: none` warns once per run
    with tempfile.TemporaryDirectory() as folder:
        async with bot_harness(Path(folder), tools="real") as bot:
            for sample in range(samples + 1):  # run 0 is a warm-up of its own (not counted)
                seen = len(bot.provider.requests)
                started = time.monotonic()
                status, _body = await bot.command("fix the flaky test in billing")
                assert status == 200, status
                await bot.provider.wait_for(requests=seen + 3, timeout=60)  # one per agent
                run: dict[str, float] = {}
                for request in bot.provider.requests[seen:]:
                    run.setdefault(request.api, request.received_at - started)
                await bot.settle(timeout=60)
                if sample:
                    for api, seconds in run.items():
                        firsts.setdefault(api, []).append(seconds)
    logging.disable(logging.NOTSET)
    first = [min(values) for values in zip(*firsts.values(), strict=True)]
    last = [max(values) for values in zip(*firsts.values(), strict=True)]
    print(
        f"bot: a signed `/massgen` POST to the run's first model request, {samples} runs, "
        "three-backend team (openai + claude + chatcompletion): "
        f"median {statistics.median(first):.3f} s, p99 {pct(first, 0.99):.3f} s"
    )
    print(
        "  to the last agent's first request: "
        f"median {statistics.median(last):.3f} s, p99 {pct(last, 0.99):.3f} s"
    )
    each = ", ".join(f"{api} {statistics.median(v):.3f} s" for api, v in sorted(firsts.items()))
    print(f"  each agent's first request (median): {each}; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    asyncio.run(overhead())
    asyncio.run(concurrent())
    asyncio.run(memory())
    asyncio.run(growth())
    asyncio.run(loopback_tokens())
    asyncio.run(cli_startup())
    asyncio.run(bot_startup())


if __name__ == "__main__":
    main()
