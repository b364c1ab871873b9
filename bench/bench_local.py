"""The embedded team's answer quality: a fixed task set, the real model, the real tools, checked answers.

Three tasks, each a whole run of the local team with tools (`local_team(2)` with `tool_calls: true`:
SmolLM2-135M under llama.cpp, tools as grammar-held JSON) on a tiny git repository, with the real
toolbox (bubblewrap sandbox) and an in-memory approval service that nobody answers:

- file: "what version is in VERSION?": passes when the final answer contains `7.3.1`;
- fix: a one-line bug (`a - b` for `a + b`): passes when the winner's patch, applied to a fresh copy,
  makes `python3 test_app.py` exit 0;
- haiku: passes when the final answer is three non-empty lines of at most 60 characters.

Prints pass/fail and seconds per task, and the pass count. Skipped without the `local` extra.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from approvals.service import ApprovalService
from approvals.testing import InMemoryApprovalStore, InMemoryAuditLog
from orchestrator import start_run
from orchestrator.config.team import TeamConfig, local_team
from orchestrator.events import RunEvent, RunFinished
from orchestrator.ports import RunContext, RunTools
from orchestrator.testing import ended
from orchestrator.tools.toolbox import build_run_tools

TASK_TIMEOUT_S = 120.0
APP = "def add(a, b):\n    return a - b\n"
TEST = "from app import add\n\nassert add(2, 3) == 5, add(2, 3)\nprint('ok')\n"


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _repo(root: Path) -> Path:
    source = root / "repo"
    source.mkdir()
    (source / "VERSION").write_text("7.3.1\n")
    (source / "app.py").write_text(APP)
    (source / "test_app.py").write_text(TEST)
    _git("init", "-q", "-b", "main", cwd=source)
    _git("add", ".", cwd=source)
    _git("-c", "user.email=b@b", "-c", "user.name=b", "commit", "-q", "-m", "init", cwd=source)
    return source


def _fix_passes(source: Path, patch: str | None) -> bool:
    if not patch:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy"
        shutil.copytree(source, copy)
        applied = subprocess.run(["git", "apply", "-"], cwd=copy, input=patch, text=True, capture_output=True)
        if applied.returncode != 0:
            return False
        test = subprocess.run([sys.executable, "test_app.py"], cwd=copy, capture_output=True, timeout=30)
        return test.returncode == 0


def _is_haiku(answer: str) -> bool:
    lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
    return len(lines) == 3 and all(len(line) <= 60 for line in lines)


Check = Callable[[Path, RunFinished], bool]
TASKS: tuple[tuple[str, str, Check], ...] = (
    ("file", "What version number is in the file VERSION?", lambda _, f: "7.3.1" in f.answer),
    (
        "fix",
        "app.py has a one-line bug: test_app.py fails. Fix app.py so that `python3 test_app.py` passes.",
        lambda source, f: _fix_passes(source, f.patch),
    ),
    ("haiku", "Write a haiku about on-call.", lambda _, f: _is_haiku(f.answer)),
)


async def _one(root: Path, team: TeamConfig, task: str, check: Check) -> tuple[bool, float, str]:
    source = _repo(root)
    team = team.model_copy(update={"workspace": team.workspace.model_copy(update={"source": source})})
    service = ApprovalService(InMemoryApprovalStore(), InMemoryAuditLog(), None, poll_interval=0.05)
    events: list[RunEvent] = []

    async def keep(event: RunEvent) -> None:
        events.append(event)

    async def tools(ctx: RunContext) -> RunTools:
        return await build_run_tools(ctx, approvals=service, root=root / "ws")

    began = time.perf_counter()
    handle = await start_run(team, task, tools=tools, subscribers=[keep])
    try:
        finished = await asyncio.wait_for(ended(handle), timeout=TASK_TIMEOUT_S)
    except TimeoutError:
        await handle.cancel()
        return False, time.perf_counter() - began, "timed out"
    except AssertionError as parked:  # a call asked for approval, and nobody answers here
        return False, time.perf_counter() - began, str(parked)
    seconds = time.perf_counter() - began
    if not isinstance(finished, RunFinished):
        return False, seconds, f"ended {finished.kind}"
    calls = sum(1 for e in events if e.kind == "tool_decision")
    return check(source, finished), seconds, f"{calls} tool calls; answer {finished.answer[:60]!r}"


def _with_tools(team: TeamConfig) -> TeamConfig:
    """The local team with tools, which `local` backends opt into (`tool_calls: true`)."""
    agents = [
        a.model_copy(update={"backend": a.backend.model_copy(update={"tool_calls": True})})
        for a in team.agents
    ]
    return team.model_copy(update={"agents": agents})


async def _bench() -> None:
    team = _with_tools(local_team(2))
    passed = 0
    for name, task, check in TASKS:
        with tempfile.TemporaryDirectory() as tmp:
            ok, seconds, detail = await _one(Path(tmp), team, task, check)
        passed += ok
        print(f"   {name:<6} {'pass' if ok else 'FAIL'}  {seconds:6.1f} s  {detail}")
    print(f"   local team (2 x SmolLM2-135M, tools): {passed}/{len(TASKS)} tasks passed")


def main() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        print("   skipped: the `local` extra is not installed")
        return
    asyncio.run(_bench())


if __name__ == "__main__":
    main()
