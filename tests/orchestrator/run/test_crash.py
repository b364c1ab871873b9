"""Real crashes: a child process runs a run on SQLite, is killed with SIGKILL at a chosen point, and a
new process resumes it by id (issue 11).

The model is the loopback provider (real OpenAI SDK over HTTP), which counts every request; the tool
appends a line to a file (the side effect). Kill points are deterministic: the child says where it
holds (`crash_child.py`), and holds until killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from approvals import ApprovalService, Principal, SqlApprovalStore, SqlAuditLog, make_engine
from orchestrator import SqlRunStore
from orchestrator.events import RunFinished, ToolStarted
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply
from tests.orchestrator.run.crash_child import APPROVER, RUN_ID, command

ROOT = Path(__file__).resolve().parents[3]
DEADLINE_S = 60.0


@dataclass
class Scene:
    tmp: Path
    server: ProviderServer

    @property
    def side(self) -> Path:
        return self.tmp / "side.log"

    def ran(self) -> int:
        return len(self.side.read_text().splitlines()) if self.side.exists() else 0

    def child(self, mode: str, scenario: str) -> subprocess.Popen[str]:
        args = [str(self.tmp / "runs.db"), str(self.tmp / "ws"), str(self.side), self.server.openai_base_url]
        return subprocess.Popen(
            [sys.executable, "-m", "tests.orchestrator.run.crash_child", mode, *args, scenario],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip

    def opening_requests(self, model: str) -> int:
        """How often the model was sent its first coordination call (the task alone, answers offered)."""
        return sum(
            1
            for r in self.server.requests
            if r.model == model and len(r.messages) == 1 and "new_answer" in r.tools
        )


def a0_handler(side: Path):  # type: ignore[no-untyped-def]
    """a0 (model m0) first runs the command; every other reply is the protocol agent's."""

    def handler(request: ProviderRequest) -> Reply:
        first = request.model == "m0" and "new_answer" in request.tools
        if first and not any(m.role in ("assistant", "tool") for m in request.messages):
            return Reply(tool_calls=[("run_command", {"command": command(side)})])
        return protocol_agent(request)

    return handler


@pytest.fixture
async def scene(tmp_path: Path) -> AsyncIterator[Scene]:
    async with ProviderServer(a0_handler(tmp_path / "side.log")) as server:
        yield Scene(tmp_path, server)


async def line(proc: subprocess.Popen[str]) -> str:
    """The child's next stdout line (read off the loop), within the deadline."""
    assert proc.stdout is not None
    text = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), DEADLINE_S)
    return text.strip()


async def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(proc.wait)
    assert proc.stdout is not None
    proc.stdout.close()


async def finish(scene: Scene) -> str:
    proc = scene.child("resume", "none")
    try:
        return await line(proc)
    finally:
        await asyncio.to_thread(proc.wait, DEADLINE_S)
        assert proc.stdout is not None
        proc.stdout.close()


async def stored_result(scene: Scene) -> tuple[str, RunFinished, list[object]]:
    engine = make_engine(f"sqlite:///{scene.tmp / 'runs.db'}")
    try:
        store = SqlRunStore(engine)
        summary = await store.get(RUN_ID)
        events = await store.events(RUN_ID)
    finally:
        await engine.dispose()
    assert summary is not None
    assert isinstance(events[-1], RunFinished)
    return summary.status, events[-1], list(events)


async def test_killed_after_a_completed_model_call_the_call_is_not_made_again(scene: Scene) -> None:
    proc = scene.child("start", "model_call")
    try:
        assert await line(proc) == "at model_call"
    finally:
        await kill(proc)
    assert scene.ran() == 0  # held before the tool could start
    assert await finish(scene) == "ended finished"
    assert scene.opening_requests("m0") == 1  # a0's completed first call was not repeated
    assert scene.ran() == 1  # its tool ran once, after the restart
    status, finished, _ = await stored_result(scene)
    assert status == "finished"
    assert finished.answer.startswith(("Final answer", "Answer from"))


async def test_killed_while_a_tool_runs_it_is_never_run_again(scene: Scene) -> None:
    proc = scene.child("start", "tool_started")
    try:
        assert await line(proc) == "at tool_started"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while scene.ran() == 0:  # the tool runs while the child holds its event delivery
            assert loop.time() < deadline, "the tool never ran"
            await asyncio.sleep(0.01)
    finally:
        await kill(proc)
    assert await finish(scene) == "ended finished"
    assert scene.ran() == 1  # exactly once: the restart did not re-run it
    assert scene.opening_requests("m0") == 1
    told = [r for r in scene.server.requests if any("interrupted by a restart" in m.text for m in r.messages)]
    assert told  # a0 was told the outcome is unknown
    assert all(r.model == "m0" for r in told)
    status, _, events = await stored_result(scene)
    assert status == "finished"
    assert sum(isinstance(e, ToolStarted) for e in events) == 1


async def test_killed_while_parked_the_approval_resumes_it_in_a_new_process(scene: Scene) -> None:
    proc = scene.child("start", "parked")
    try:
        parked = await line(proc)
    finally:
        await kill(proc)
    assert parked.startswith("at parked apr_")
    request_id = parked.split()[-1]
    requests_before = len(scene.server.requests)
    assert scene.ran() == 0
    # The approver answers from another process (here: the test), long after the bot died.
    engine = make_engine(f"sqlite:///{scene.tmp / 'runs.db'}")
    service = ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine))
    await service.decide(request_id, Principal(id=APPROVER), approve=True)
    await engine.dispose()

    assert await finish(scene) == "ended finished"
    assert scene.ran() == 1
    assert scene.opening_requests("m0") == 1
    assert scene.opening_requests("m1") == 1  # a1's answer from the first process stood
    assert len(scene.server.requests) > requests_before
    status, _, events = await stored_result(scene)
    assert status == "finished"
    [started] = [e for e in events if isinstance(e, ToolStarted)]
    assert started.request_id == request_id  # the approved call carries its request id
