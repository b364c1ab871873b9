"""Permission engine throughput and latency on one core: a mixed 10,000-action workload, then the
worst case: adversarial inputs up to the size limit.

The mix is the test catalogue (ordinary work, floor, egress, secrets, obfuscation, chaining…) plus
generated variants with unique arguments, so both the parse cache and cold parses are measured.
The adversarial set is every catalogue plus generated pathological shapes (deep nesting, thousands
of `&&` and `|`, long quotes, backslashes, here-documents, brace lists) up to 16 KiB, judged cold.
Each figure is the best of three rounds: on a shared machine one round measures the neighbours.
Targets: p99 ≤ 2 ms per decision; worst adversarial decision ≤ 50 ms.
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
from approvals.permissions.shell import MAX_SHELL_CHARS, expand, parse_shell

CATALOGUE_DIR = Path(__file__).resolve().parent.parent / "tests" / "approvals" / "permissions" / "catalogue"
CATALOGUE = CATALOGUE_DIR / "actions.yaml"
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
        # Three rounds, the best kept (by p99): a shared machine's neighbours are not the engine.
        cold: list[tuple[float, list[float]]] = []
        warm: list[tuple[float, list[float]]] = []
        for _ in range(3):
            parse_shell.cache_clear()
            expand.cache_clear()
            cold.append(_run(engine, actions))
            warm.append(_run(engine, actions))
        elapsed, latencies = min(cold, key=lambda r: _percentile(r[1], 0.99))
        _report("cold caches (10k mixed)", elapsed, latencies)
        elapsed, latencies = min(warm, key=lambda r: _percentile(r[1], 0.99))
        _report("warm parse cache (10k mixed)", elapsed, latencies)
        p99_ms = _percentile(latencies, 0.99) * 1000
        print(f"   p99 target 2 ms: {'met' if p99_ms < 2 else 'MISSED'} ({p99_ms:.3f} ms warm)")
        _adversarial(Path(tmp))


def _catalogue_actions() -> list[Action]:
    """Every string in every catalogue file, as the action it names (commands when unprefixed)."""
    actions: list[Action] = []
    for path in sorted(CATALOGUE_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for items in data.values() if isinstance(data, dict) else ():
            for item in items if isinstance(items, list) else ():
                if not isinstance(item, str):
                    continue
                kind, _, target = item.partition(" ")
                if kind in ("command", "read", "write", "fetch", "tool"):
                    actions.append(Action(kind=kind, target=target))  # type: ignore[arg-type]
                else:
                    actions.append(Action(kind="command", target=item))
    return actions


def pathological(limit: int = MAX_SHELL_CHARS) -> list[str]:
    """Generated worst shapes up to the size limit (deep nesting, long lists, quotes, escapes…)."""
    n = limit
    shapes = [
        "$(" * 40 + "ls" + ")" * 40, "( " * 60 + "ls" + ")" * 60, "{ " * 60 + "ls;" + " }" * 60,
        "( " * 3000 + "ls" + ")" * 3000, "echo " + "$(" * 2000 + "ls" + ")" * 2000,
        " && ".join(["ls"] * (n // 6)), " | ".join(["cat"] * (n // 6)), " ; ".join(["rm -rf b"] * (n // 11)),
        "echo '" + "a" * (n - 10) + "'", "echo " + "\\" * (n - 6), "echo " + "\\\n" * (n // 3),
        "".join(f"cat <<E{i}\nx\nE{i}\n" for i in range(n // 16)), "cat <<E\n" + "x\n" * (n // 2 - 8) + "E\n",
        "echo {" + ",".join(str(i) for i in range(n // 6)) + "}", "echo " + "{a,b}" * (n // 6),
        "echo " + "{," * (n // 3), "x " * (n // 2), "ls " + "-la " * (n // 4), "a=b " * (n // 4) + "ls",
        "echo " + "$x" * (n // 3), "echo " + "${x:-" * (n // 6), "$((" * (n // 4),
        "echo $((" + "1+" * (n // 3) + "1))",
        ":(){ :|:& };:" * (n // 14), "f(){ " * (n // 6), "while true; do " * (n // 16),
        "rm -rf " + "/a" * (n // 3), "rm -rf " + "x/" * (n // 2 - 4), "cat " + "'a' " * (n // 4),
        "echo " + "'a'\"b\"" * (n // 7), "echo " + '"' * (n - 6), "a=" + "'" * (n - 2),
        "python3 -c '" + "system(\"" * (n // 9) + "'", "python3 -c 'system" + " " * (n - 30) + "'",
        "python -c '" + "rmtree(" * (n // 8) + "'", "perl -e 'fork" + " " * (n - 20) + "'",
        "sqlite3 db '" + "\n" * (n - 12) + "'", "chmod " + "u" * (n - 10) + " f",
        "git commit -m '" + "rm -rf / " * (n // 10) + "'",
        "bash -c '" + "bash -c \"" * 8 + "rm -rf /" + "\"" * 8 + "'",
        "eval " + "eval " * (n // 5), "x='$(ls)'; echo " + "$((x))" * (n // 8),
    ]  # fmt: skip
    return [s[:n] for s in shapes]


def _adversarial(workspace: Path) -> None:
    rules = load_rules({"allow": ["command(*)", "read(**)", "write(**)", "fetch(*)"]})
    engine = PermissionEngine(PermissionConfig(workspace=workspace, policy="allow-all", rules=rules))
    actions = [Action(kind="command", target=t) for t in pathological()] + _catalogue_actions()
    for kind, text in (("read", "a/" * 2048), ("write", "../" * 1365), ("fetch", "https://" + "a." * 2040),
                       ("fetch", "https://x.com/" + "%2e%2e/" * 580), ("read", "*" * 4096)):  # fmt: skip
        actions.append(Action(kind=kind, target=text[:4096]))  # type: ignore[arg-type]
    # Each input is judged cold (caches cleared) three times and the best time kept: on a shared
    # machine a single run measures the neighbours' load as much as the engine.
    timed: list[tuple[float, Action]] = []
    started = time.perf_counter()
    for action in actions:
        best = float("inf")
        for _ in range(3):
            parse_shell.cache_clear()
            expand.cache_clear()
            t0 = time.perf_counter()
            engine.evaluate(action)
            best = min(best, time.perf_counter() - t0)
        timed.append((best, action))
    elapsed = time.perf_counter() - started
    latencies = [t for t, _ in timed]
    _report(f"adversarial ({len(actions)}, cold, best of 3)", elapsed / 3, latencies)
    worst_s, worst_action = max(timed, key=lambda x: x[0])
    worst_ms = worst_s * 1000
    shown = worst_action.target[:40].replace("\n", "\\n")
    size = len(worst_action.target)
    print(f"   worst adversarial: {worst_ms:.1f} ms ({worst_action.kind} {shown!r}…, {size} chars)")
    p99_ms = _percentile(latencies, 0.99) * 1000
    print(
        f"   adversarial p99 target 2 ms: {'met' if p99_ms <= 2 else 'MISSED'} ({p99_ms:.3f} ms); "
        f"worst target 50 ms: {'met' if worst_ms <= 50 else 'MISSED'} ({worst_ms:.1f} ms)"
    )


if __name__ == "__main__":
    main()
