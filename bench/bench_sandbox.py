"""Sandbox and tool overhead: what bubblewrap adds to a command, and file-tool latency.

Prints p50/p99 per call for `true` run unconfined vs under bubblewrap (with its limits), the
ratio, the same with the egress proxy and its bridge (and a GET through them), the latency
of read_file/write_file/search_files on a small workspace, what per-agent workspace copies
and the winner's patch cost for a 2,000-file source, and what its snapshots in the database
(SQLite here) cost: the source stored at the start, a checkpoint after a tool call changed 3
files, one that changed nothing, and the restore on another machine.
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from orchestrator.tools.proxy import EgressRules
from orchestrator.tools.sandbox import Sandbox, SandboxSpec, sandbox_status
from orchestrator.tools.specs import ToolEnv, execute, parse_args
from orchestrator.tools.workspace import RunWorkspaces
from orchestrator.tools.wsync import SnapshotLimits, WorkspaceSync

RUNS = 60


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _time(fn: Callable[[], Awaitable[object]], runs: int = RUNS) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _report(name: str, samples: list[float]) -> float:
    p50 = statistics.median(samples)
    print(f"   {name:<28} p50 {p50:7.2f} ms   p99 {_pct(samples, 0.99):7.2f} ms")
    return p50


async def _run(ws: Path) -> None:
    # The `sandbox: none` warning is for operators; here it would repeat once per timed run.
    logging.getLogger("orchestrator.tools.sandbox").setLevel(logging.ERROR)
    spec = SandboxSpec(workspace=ws, timeout_s=10)
    plain = _report("command, sandbox: none", await _time(lambda: Sandbox("none").run("true", spec)))
    problem = await sandbox_status("bwrap")
    if problem is None:
        boxed = Sandbox("bwrap")
        await boxed.check()
        confined = _report("command, bubblewrap", await _time(lambda: boxed.run("true", spec)))
        print(f"   bubblewrap overhead ratio   {confined / plain:.2f}x")
        await _egress(ws, boxed, spec, confined)
    else:
        print(f"   bubblewrap unusable here, skipped: {problem}")
    for i in range(200):
        (ws / f"f{i}.py").write_text(f"def f{i}():\n    return {i}\n" * 20)
    env = ToolEnv(workspace=ws, sandbox=Sandbox("none"))
    calls = {
        "read_file": ("read_file", {"path": "f7.py"}),
        "write_file": ("write_file", {"path": "out/new.py", "content": "x = 1\n" * 100}),
        "search_files (200 files)": ("search_files", {"pattern": r"return 1\d\d"}),
    }
    for label, (tool, arguments) in calls.items():
        args = parse_args(tool, arguments)

        async def once(args: object = args) -> str:
            return await execute(args, env)  # type: ignore[arg-type]

        _report(label, await _time(once))


async def _egress(ws: Path, boxed: Sandbox, closed: SandboxSpec, confined: float) -> None:
    """What approved egress adds: the per-command proxy and the bridge in the sandbox (limits included)."""
    opened = replace(closed, network=True, hosts=("docs.example.test",))
    proxied = _report(
        "command, bwrap + egress proxy", await _time(lambda: boxed.run("true", opened), runs=30)
    )
    print(f"   egress proxy overhead ratio {proxied / confined:.2f}x (vs bubblewrap alone)")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    async def to_local(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    local = Sandbox("bwrap", egress=EgressRules(resolver=to_local, allow_private=True))
    url = f"http://docs.example.test:{server.server_address[1]}/"
    get = f"python3 -c \"import urllib.request; urllib.request.urlopen('{url}').read()\""
    _report("GET through the proxy (python)", await _time(lambda: local.run(get, opened), runs=20))
    server.shutdown()
    server.server_close()


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return


def _workspaces(tmp: Path, files: int = 2000, agents: int = 3) -> None:
    """Copy cost of per-agent workspaces and the cost of the winner's patch, for a mid-size repo."""
    source = tmp / "source"
    for i in range(files):
        path = source / f"pkg{i % 40}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{i}():\n    return {i}\n" * 30)
    started = time.perf_counter()
    ids = tuple(f"agent{i}" for i in range(agents))
    spaces = RunWorkspaces.create(root=tmp / "ws", run_id="bench", agent_ids=ids, source=source)
    created = time.perf_counter() - started
    for i in range(0, files, 100):
        (spaces.path("agent0") / f"pkg{i % 40}" / f"mod{i}.py").write_text("changed\n")
    started = time.perf_counter()
    patch = spaces.patch("agent0") or ""
    diffed = time.perf_counter() - started
    print(f"   workspaces: {files} files x ({agents} agents + snapshot) created in {created * 1000:.0f} ms")
    print(f"   winner patch ({files // 100} files changed, {len(patch)} chars) in {diffed * 1000:.0f} ms")
    spaces.close()


def _source(top: Path, files: int) -> Path:
    for i in range(files):
        path = top / f"pkg{i % 40}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{i}():\n    return {i}\n" * 30)
    past = time.time_ns() - 3600 * 10**9  # a checkout from an hour ago, as a real source is
    for path in top.rglob("*.py"):
        os.utime(path, ns=(past, past))
    return top


async def _snapshots(tmp: Path, files: int = 2000, rounds: int = 20) -> None:
    """Checkpoint cost of a 2,000-file workspace with 3 files changed, on SQLite (the bot's default)."""
    from approvals import make_engine
    from orchestrator import SqlWorkspaceStore, workspace_metadata

    engine = make_engine(f"sqlite:///{tmp / 'bench.db'}")
    async with engine.begin() as conn:
        await conn.run_sync(workspace_metadata.create_all)
    store = SqlWorkspaceStore(engine)
    source = _source(tmp / "source", files)
    ids = ("agent0", "agent1", "agent2")
    spaces = RunWorkspaces.create(root=tmp / "m1", run_id="bench", agent_ids=ids, source=source)
    sync = WorkspaceSync(store, spaces, SnapshotLimits())
    started = time.perf_counter()
    await sync.snapshot_source()
    first = time.perf_counter() - started
    changed: list[float] = []
    idle: list[float] = []
    for r in range(rounds):
        for i in (r, r + 700, r + 1400):
            (spaces.path("agent0") / f"pkg{i % 40}" / f"mod{i}.py").write_text(f"changed in round {r}\n")
        started = time.perf_counter()
        await sync.checkpoint("agent0")
        changed.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await sync.checkpoint("agent0")
        idle.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    other = RunWorkspaces(root=tmp / "m2", run_id="bench", agent_ids=ids, source=source)
    await WorkspaceSync(store, other, SnapshotLimits()).reopen()
    restored = time.perf_counter() - started
    print(f"   snapshot: {files}-file source stored at run start in {first * 1000:.0f} ms")
    _report("checkpoint, 3 files changed", changed)
    _report("checkpoint, nothing changed", idle)
    print(f"   restore on another machine ({len(ids)} agents + source) in {restored * 1000:.0f} ms")
    await engine.dispose()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        asyncio.run(_run(Path(tmp)))
    with tempfile.TemporaryDirectory(prefix="bench-workspaces-") as tmp:
        _workspaces(Path(tmp))
    with tempfile.TemporaryDirectory(prefix="bench-snapshots-") as tmp:
        asyncio.run(_snapshots(Path(tmp)))


if __name__ == "__main__":
    main()
