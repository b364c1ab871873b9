"""Fail-stop persistence: a run never goes on with events its store did not take.

The store is the in-memory one behind a fault switch (a database that refuses writes): while it
is down, a checkpoint waits; past the run's retry window the run suspends, and nothing unstored
reaches a subscriber or runs. A real toolbox and gate run the command, so "ran" is a side effect
on disk, not a flag.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from approvals import ApprovalService
from approvals.permissions import PermissionConfig
from approvals.testing import InMemoryApprovalStore, InMemoryAuditLog
from orchestrator import (
    InMemoryRunStore,
    RunContext,
    RunFinished,
    RunStoreError,
    RunStoreUnavailable,
    RunTools,
    Suspended,
    build_run_tools,
    resume_run,
    start_run,
)
from orchestrator.events import RunEvent, RunStarted, ToolStarted, TurnMessage
from orchestrator.run.coordination import CoordinationState
from orchestrator.run.emitter import Emitter
from orchestrator.testing import ScriptedModels, Turn, call, hang, scripted_team
from tests.orchestrator.tools.fakes import ScriptedEngine


class FaultyStore(InMemoryRunStore):
    """Refuses every write while `down` is set (as a stopped database does); counts the refusals."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.down_on_tool_start = False  # goes down at the first ToolStarted write
        self.refused = 0

    async def append(self, *events: RunEvent) -> None:
        if self.down_on_tool_start and any(isinstance(e, ToolStarted) for e in events):
            self.down, self.down_on_tool_start = True, False
        if self.down:
            self.refused += 1
            raise RunStoreError("connection refused")
        await super().append(*events)


def _emitter(store: FaultyStore, *, retry_for: float, lost: list[BaseException]) -> Emitter:
    return Emitter(
        "run-1",
        clock=lambda: 0.0,
        store=store,
        state=CoordinationState(),
        retry_for=retry_for,
        on_lost=lost.append,
    )


async def _started(store: FaultyStore, emitter: Emitter) -> None:
    emitter.start()
    await emitter.checkpoint(RunStarted(task="t", agents=()))
    assert len(await store.events("run-1")) == 1


async def test_a_checkpoint_waits_for_the_store_to_come_back() -> None:
    store, lost = FaultyStore(), list[BaseException]()
    emitter = _emitter(store, retry_for=30, lost=lost)
    seen: list[int] = []
    emitter.subscribe(lambda e: seen.append(e.seq))
    await _started(store, emitter)
    store.down = True
    waiting = asyncio.create_task(emitter.checkpoint(TurnMessage(agent_id="a0", role="user", text="x")))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while store.refused < 3:  # tried again, with backoff
        assert loop.time() < deadline
        await asyncio.sleep(0.01)
    assert not waiting.done()
    assert 2 not in seen  # not stored: nobody hears of it
    store.down = False
    await asyncio.wait_for(waiting, 10)
    assert [e.seq for e in await store.events("run-1")] == [1, 2]
    await emitter.close()
    assert seen == [1, 2]
    assert lost == []


async def test_a_store_away_past_the_window_loses_the_emitter_and_shows_nothing() -> None:
    store, lost = FaultyStore(), list[BaseException]()
    emitter = _emitter(store, retry_for=0.3, lost=lost)
    seen: list[int] = []
    emitter.subscribe(lambda e: seen.append(e.seq))
    await _started(store, emitter)
    store.down = True
    with pytest.raises(RunStoreUnavailable) as caught:
        await emitter.checkpoint(TurnMessage(agent_id="a0", role="user", text="x"))
    assert caught.value.run_id == "run-1"
    emitter.emit(TurnMessage(agent_id="a0", role="user", text="later"))
    store.down = False
    await emitter.close()
    assert seen == [1]
    assert [e.seq for e in await store.events("run-1")] == [1]  # later events are not stored either
    assert len(lost) == 1


class Team:
    """a0 runs one command through the real toolbox and gate, then both agents converge."""

    def __init__(self, tmp_path: Path, *, timeout: float) -> None:
        self.side = tmp_path / "side.log"
        self.root = tmp_path / "ws"
        self.service = ApprovalService(InMemoryApprovalStore(), InMemoryAuditLog(), poll_interval=0.01)
        self.team = scripted_team(2, timeout_seconds=timeout).model_copy(update={"sandbox": "none"})
        self.models = ScriptedModels(
            {"a0": [Turn(text="run it", calls=(call("run_command", command=f"echo ran >> {self.side}"),))]}
        )

    async def tools(self, ctx: RunContext) -> RunTools:
        def engine(_config: PermissionConfig) -> ScriptedEngine:
            return ScriptedEngine({})  # every command allowed

        return await build_run_tools(ctx, approvals=self.service, root=self.root, engine_factory=engine)

    def ran(self) -> int:
        return len(self.side.read_text().splitlines()) if self.side.exists() else 0


async def test_a_tool_runs_only_once_stored_as_started_after_an_outage(tmp_path: Path) -> None:
    team, store = Team(tmp_path, timeout=60), FaultyStore()
    store.down_on_tool_start = True
    handle = await start_run(
        team.team, "t", models=team.models, tools=team.tools, store=store, run_id="run-1"
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while store.refused < 3:
        assert loop.time() < deadline
        await asyncio.sleep(0.01)
    assert team.ran() == 0  # its start is not stored: it waits
    store.down = False
    result = await asyncio.wait_for(handle.outcome(), 30)
    assert isinstance(result, RunFinished)
    assert team.ran() == 1
    kinds = [e.kind for e in await store.events("run-1")]
    assert kinds.count("tool_started") == 1
    assert kinds[-1] == "finished"


async def test_a_run_whose_store_stays_away_suspends_and_resumes_from_what_was_stored(tmp_path: Path) -> None:
    team, store = Team(tmp_path, timeout=1.0), FaultyStore()
    store.down_on_tool_start = True
    handle = await start_run(
        team.team, "t", models=team.models, tools=team.tools, store=store, run_id="run-1"
    )
    outcome = await asyncio.wait_for(handle.outcome(), 30)
    assert isinstance(outcome, Suspended)
    assert team.ran() == 0  # never stored as started, so never run
    stored = await store.events("run-1")
    assert not any(isinstance(e, ToolStarted) for e in stored)
    assert stored[-1].kind not in {"finished", "failed", "cancelled"}
    store.down = False
    longer = team.team.model_copy(
        update={"orchestrator": team.team.orchestrator.model_copy(update={"timeout_seconds": 60})}
    )
    resumed = await resume_run("run-1", longer, store, models=ScriptedModels(), tools=team.tools)
    result = await asyncio.wait_for(resumed.outcome(), 30)
    assert isinstance(result, RunFinished)
    assert team.ran() <= 1  # the resumed turn may run it again, once: it was never reported
    assert [e.seq for e in await store.events("run-1")] == list(
        range(1, len(await store.events("run-1")) + 1)
    )


async def test_a_returning_driver_is_fenced_by_its_successor_and_never_writes_over_it() -> None:
    """Two drivers of one run (a worker taken for dead returns): the old one stops at its first write."""
    store, gate = InMemoryRunStore(), asyncio.Event()
    team = scripted_team(2, timeout_seconds=60)
    old_models = ScriptedModels({"a0": [hang(gate)], "a1": [hang(gate)]})
    old = await start_run(team, "t", models=old_models, store=store, run_id="run-1")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while len(old_models.clients) < 2 or any(not c.requests for c in old_models.clients.values()):
        assert loop.time() < deadline, "the agents never called their models"
        await asyncio.sleep(0.01)
    successor = await resume_run("run-1", team, store, models=ScriptedModels())
    result = await asyncio.wait_for(successor.outcome(), 30)
    assert isinstance(result, RunFinished)
    settled = await store.events("run-1")
    gate.set()  # the old driver's model calls return: its next write meets the successor's seqs
    outcome = await asyncio.wait_for(old.outcome(), 30)
    assert isinstance(outcome, Suspended)
    assert outcome.fenced
    assert await store.events("run-1") == settled  # nothing written over the successor
    assert [e.kind for e in settled].count("finished") == 1
