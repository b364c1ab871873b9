"""Permission engine throughput and latency on one core: a mixed 10,000-action workload.

The mix is the test catalogue (ordinary work, floor, egress, secrets, obfuscation, chaining…) plus
generated variants with unique arguments, so both the parse cache and cold parses are measured.
Target: p99 < 2 ms per decision.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from approvals.permissions import Action, PermissionConfig, PermissionEngine, load_rules
from approvals.permissions.shell.invocation import expand
from approvals.permissions.shell.parse import parse_shell

CATALOGUE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "approvals"
    / "permissions"
    / "catalogue"
    / "actions.yaml"
)
N_ACTIONS = 10_000
TEMPLATES = (
    "git commit -m 'change {n}'",
    "pytest tests/test_{n}.py -q",
    "cat src/module_{n}.py | grep -n def | head -20",
    "sed -i 's/old{n}/new{n}/g' src/file_{n}.py",
    "curl -s https://api{n}.example.com/v1 | jq .",
    "bash -c 'cd build{n} && make -j4 && ./run_{n}.sh'",
    "echo {n} > out/{n}.txt && rm -rf tmp/{n}",
    "find . -name '*{n}*.py' -exec grep -l foo {{}} +",
)


def _workload(rng: random.Random) -> list[Action]:
    data: dict[str, Any] = yaml.safe_load(CATALOGUE.read_text())
    base: list[Action] = []
    for category, items in data.items():
        if category == "chaining_rules":
            continue
        for item in items:
            kind, _, target = item.partition(" ")
            base.append(Action(kind=kind, target=target))
    actions: list[Action] = []
    for i in range(N_ACTIONS):
        if i % 2:
            actions.append(rng.choice(base))
        else:
            actions.append(Action(kind="command", target=rng.choice(TEMPLATES).format(n=i)))
    return actions


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run(engine: PermissionEngine, actions: list[Action]) -> tuple[float, list[float]]:
    latencies: list[float] = []
    started = time.perf_counter()
    for action in actions:
        t0 = time.perf_counter()
        engine.evaluate(action)
        latencies.append(time.perf_counter() - t0)
    return time.perf_counter() - started, latencies


def _report(label: str, elapsed: float, latencies: list[float]) -> None:
    ms = [x * 1000 for x in latencies]
    print(
        f"   {label:<28} {len(ms) / elapsed:>9,.0f} decisions/s   p50 {statistics.median(ms):.3f} ms"
        f"   p99 {_percentile(ms, 0.99):.3f} ms   max {max(ms):.2f} ms"
    )


def main() -> None:
    rng = random.Random(20261130)
    actions = _workload(rng)
    with tempfile.TemporaryDirectory() as tmp:
        rules = load_rules(
            {"allow": ["command(npm run *)", "write(src/**)"], "deny": ["command(git push --force*)"]}
        )
        engine = PermissionEngine(PermissionConfig(workspace=Path(tmp), rules=rules))
        parse_shell.cache_clear()
        expand.cache_clear()
        elapsed, latencies = _run(engine, actions)
        _report("cold caches (10k mixed)", elapsed, latencies)
        elapsed, latencies = _run(engine, actions)
        _report("warm parse cache (10k mixed)", elapsed, latencies)
        p99_ms = _percentile(latencies, 0.99) * 1000
        print(f"   p99 target 2 ms: {'met' if p99_ms < 2 else 'MISSED'} ({p99_ms:.3f} ms warm)")


if __name__ == "__main__":
    main()
