"""Run stores: the in-memory fake and the SQL adapter (SQLite always, PostgreSQL when available)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orchestrator.coordination import rebuild_state
from orchestrator.errors import RunStoreError
from orchestrator.events import AnswerSubmitted, RunStarted
from orchestrator.run import start_run
from orchestrator.sql import SqlRunStore
from orchestrator.store import InMemoryRunStore, RunStore
from orchestrator.testing import ScriptedModels, hang, scripted_team
from tests.conftest import postgres_url


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunStore]:
    if request.param == "memory":
        yield InMemoryRunStore()
        return
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        url = postgres_url() or ""
        if not url:
            pytest.skip("no DATABASE_URL_POSTGRES")
    sql = await SqlRunStore.open(url)
    yield sql
    await sql.close()


async def test_finished_run_is_stored_and_folds_back(store: RunStore) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    handle = await start_run(scripted_team(3), "fix it", models=ScriptedModels(), store=store, run_id=run_id)
    result = await handle.wait()
    events = await store.events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1] == result
    assert rebuild_state(events) == handle.snapshot()
    summary = await store.get(run_id)
    assert summary is not None
    assert (summary.status, summary.task, summary.winner) == ("finished", "fix it", result.winner)  # type: ignore[union-attr]
    assert summary.cost_usd == result.cost_usd  # type: ignore[union-attr]
    assert summary.input_tokens > 0
    assert run_id in [s.run_id for s in await store.runs(limit=100, status="finished")]


async def test_cancelled_run_summary(store: RunStore) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    handle = await start_run(
        scripted_team(2),
        "t",
        models=ScriptedModels({"a0": [hang()], "a1": [hang()]}),
        store=store,
        run_id=run_id,
    )
    await handle.cancel(by="U1")
    await handle.wait()
    summary = await store.get(run_id)
    assert summary is not None
    assert summary.status == "cancelled"
    assert summary.ended_at is not None
    assert run_id not in [s.run_id for s in await store.runs(limit=100, status="running")]


async def test_unknown_run(store: RunStore) -> None:
    assert await store.get("nope") is None
    assert await store.events("nope") == []


async def test_sql_refuses_duplicate_and_orphan_events(tmp_path: Path) -> None:
    store = await SqlRunStore.open(f"sqlite:///{tmp_path / 'r.db'}")
    started = RunStarted(run_id="r1", seq=1, at=1.0, task="t", agents=())
    await store.append(started)
    with pytest.raises(RunStoreError, match="already stored"):
        await store.append(started)
    orphan = AnswerSubmitted(run_id="r2", seq=1, at=1.0, agent_id="a", label="agent1.1", content="x")
    await store.append(orphan)  # not a summary event: stored, no summary row
    assert await store.get("r2") is None
    await store.close()
