"""Run stores: the in-memory fake and the SQL adapter (SQLite always, PostgreSQL when available)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from approvals import ConversationRef
from approvals.sql import make_engine
from orchestrator import resume_run, start_run
from orchestrator.errors import RunFenced, RunNotResumable, RunStoreError
from orchestrator.events import (
    AnswerSubmitted,
    RunCancelled,
    RunEvent,
    RunFinished,
    RunStarted,
    ToolApprovalRequested,
    from_json,
)
from orchestrator.ports import RunStore
from orchestrator.run.coordination import rebuild_state
from orchestrator.sql import SqlRunStore
from orchestrator.store import InMemoryRunStore, RunQuery
from orchestrator.testing import ScriptedModels, ended, hang, scripted_team
from tests.conftest import SQL_DATABASES, empty_database


@pytest.fixture(params=["memory", *SQL_DATABASES])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunStore]:
    if request.param == "memory":
        yield InMemoryRunStore()
        return
    # A fresh database: no rows of earlier runs.
    async with empty_database(request.param, f"sqlite:///{tmp_path / 'runs.db'}") as url:
        engine = make_engine(url)
        yield await SqlRunStore.create(engine)
        await engine.dispose()


async def test_finished_run_is_stored_and_folds_back(store: RunStore) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    handle = await start_run(scripted_team(3), "fix it", models=ScriptedModels(), store=store, run_id=run_id)
    result = await ended(handle)
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
    await ended(handle)
    summary = await store.get(run_id)
    assert summary is not None
    assert summary.status == "cancelled"
    assert summary.ended_at is not None
    assert run_id not in [s.run_id for s in await store.runs(limit=100, status="running")]


async def test_unknown_run(store: RunStore) -> None:
    assert await store.get("nope") is None
    assert await store.events("nope") == []


async def test_sql_refuses_duplicate_and_orphan_events(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'r.db'}")
    store = await SqlRunStore.create(engine)
    started = RunStarted(run_id="r1", seq=1, at=1.0, task="t", agents=())
    await store.append(started)
    await store.append(started)  # a retry after a lost acknowledgement: stored once
    assert await store.events("r1") == [started]
    orphan = AnswerSubmitted(run_id="r2", seq=1, at=1.0, agent_id="a", label="agent1.1", content="x")
    await store.append(orphan)  # not a summary event: stored, no summary row
    assert await store.get("r2") is None
    await engine.dispose()


async def test_events_stored_together_are_all_or_none(store: RunStore) -> None:
    run_id = f"r-{uuid.uuid4().hex[:8]}"
    started = RunStarted(run_id=run_id, seq=1, at=1.0, task="t", agents=())
    answer = AnswerSubmitted(run_id=run_id, seq=2, at=2.0, agent_id="a", label="agent1.1", content="x")
    cancelled = RunCancelled(run_id=run_id, seq=3, at=3.0, by="U1")
    await store.append(started, answer, cancelled)
    assert [e.seq for e in await store.events(run_id)] == [1, 2, 3]
    summary = await store.get(run_id)
    assert summary is not None
    assert summary.status == "cancelled"  # every summary event of the batch was folded in
    again = AnswerSubmitted(run_id=run_id, seq=4, at=4.0, agent_id="a", label="agent1.2", content="y")
    with pytest.raises(RunStoreError, match=r"seq 3 already stored"):  # the whole batch is refused
        await store.append(cancelled, again)
    assert [e.seq for e in await store.events(run_id)] == [1, 2, 3]


async def test_a_seq_stored_by_another_driver_fences_this_one(store: RunStore) -> None:
    run_id = f"r-{uuid.uuid4().hex[:8]}"
    started = RunStarted(run_id=run_id, seq=1, at=1.0, task="t", agents=())
    mine = AnswerSubmitted(run_id=run_id, seq=2, at=2.0, agent_id="a", label="agent1.1", content="mine")
    theirs = AnswerSubmitted(run_id=run_id, seq=2, at=2.5, agent_id="a", label="agent1.1", content="theirs")
    await store.append(started, theirs)
    await store.append(started, theirs)  # the successor's own retry: fine
    with pytest.raises(RunFenced) as fenced:
        await store.append(mine)
    assert fenced.value.seq == 2
    assert await store.events(run_id) == [started, theirs]


async def test_a_run_stores_the_events_queued_behind_a_transaction_together() -> None:
    calls: list[int] = []

    class Counting(InMemoryRunStore):
        async def append(self, *events: RunEvent) -> None:
            calls.append(len(events))
            await asyncio.sleep(0.01)  # a transaction's round trip: the run emits meanwhile
            await super().append(*events)

    store = Counting()
    handle = await start_run(scripted_team(3), "task", models=ScriptedModels(), store=store, run_id="r-batch")
    result = await ended(handle)
    assert isinstance(result, RunFinished)
    stored = await store.events("r-batch")
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))  # every event, in order, once
    assert sum(calls) == len(stored)
    assert len(calls) < len(stored)  # some went together
    assert max(calls) <= 64


async def test_a_resume_given_the_log_just_read_does_not_read_it_again() -> None:
    reads: list[str] = []

    class Counting(InMemoryRunStore):
        async def events(self, run_id: str) -> list[RunEvent]:
            reads.append(run_id)
            return await super().events(run_id)

    live = InMemoryRunStore()
    answered = asyncio.Event()

    def watch(event: RunEvent) -> None:
        if event.kind == "answer":
            answered.set()

    models = ScriptedModels({"a2": [hang()]})
    first = await start_run(
        scripted_team(2), "task", models=models, store=live, run_id="r-given", subscribers=[watch]
    )
    await asyncio.wait_for(answered.wait(), timeout=5)
    log = list(await live.events("r-given"))  # what the database held when the process died
    await first.cancel()
    await ended(first)
    store = Counting()
    await store.append(*log)
    reads.clear()
    resumed = await resume_run("r-given", scripted_team(2), store, models=ScriptedModels(), events=log)
    result = await ended(resumed)
    assert isinstance(result, RunFinished)
    assert reads == []  # built from the log it was given


async def test_unfinished_run_resumes_from_its_log() -> None:
    """A process dies after two of three first answers: the resumed run redoes only the third agent's turn."""
    live_store = InMemoryRunStore()
    persisted: list[RunEvent] = []
    two_answers = asyncio.Event()

    def watch(event: RunEvent) -> None:  # subscribers run after the store write
        persisted.append(event)
        if sum(e.kind == "answer" for e in persisted) == 2:
            two_answers.set()

    first = ScriptedModels({"a2": [hang()]})
    team = scripted_team(3)
    handle = await start_run(
        team, "task", models=first, store=live_store, run_id="r-crash", subscribers=[watch]
    )
    await asyncio.wait_for(two_answers.wait(), timeout=5)
    crashed_log = list(await live_store.events("r-crash"))  # what the database held when the process died
    await handle.cancel()
    await ended(handle)

    store = InMemoryRunStore()
    for event in crashed_log:
        await store.append(event)
    second = ScriptedModels()
    resumed = await resume_run("r-crash", team, store, models=second)
    result = await ended(resumed)
    assert isinstance(result, RunFinished)
    assert result.salvage is None
    events = await store.events("r-crash")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.agent_id for e in events if isinstance(e, AnswerSubmitted)] == ["a0", "a1", "a2"]
    assert second.calls == 3 + 3 + 1 - 2  # a2's answer, three votes, the presentation
    assert rebuild_state(events) == resumed.snapshot()


@pytest.mark.parametrize("case", ["unknown", "ended", "other_team"])
async def test_resume_refuses(case: str) -> None:
    store = InMemoryRunStore()
    handle = await start_run(scripted_team(2), "task", models=ScriptedModels(), store=store, run_id="r1")
    await ended(handle)
    run_id, team = {
        "unknown": ("nope", scripted_team(2)),
        "ended": ("r1", scripted_team(2)),
        "other_team": ("r1", scripted_team(3)),
    }[case]
    if case == "other_team":  # drop the terminal event so the team check is what refuses
        unfinished = InMemoryRunStore()
        for event in (await store.events("r1"))[:-1]:
            await unfinished.append(event)
        store = unfinished
    with pytest.raises(RunNotResumable):
        await resume_run(run_id, team, store, models=ScriptedModels())


async def test_the_summary_is_the_whole_truth_about_a_run(store: RunStore) -> None:
    where = ConversationRef(surface="slack", channel=f"C{uuid.uuid4().hex[:6]}", thread="1.2")
    handle = await start_run(
        scripted_team(2),
        "fix it",
        models=ScriptedModels(),
        store=store,
        requester="U1",
        team_name="default",
        conversation=where,
    )
    finished = await ended(handle)
    summary = await store.get(handle.run_id)
    assert summary is not None
    assert isinstance(finished, RunFinished)
    assert (summary.team, summary.conversation, summary.requester) == ("default", where, "U1")
    assert summary.final_answer == finished.answer
    assert not summary.running


async def test_find_filters_by_status_requester_and_channel(store: RunStore) -> None:
    channel = f"C{uuid.uuid4().hex[:6]}"
    here, elsewhere = (ConversationRef(surface="slack", channel=c) for c in (channel, channel + "X"))
    ids = {}
    for name, (who, where, at) in {
        "mine": ("U1", here, 1.0),
        "theirs": ("U2", here, 2.0),
        "away": ("U1", elsewhere, 3.0),
    }.items():
        run_id = f"run-{uuid.uuid4().hex[:8]}"
        ids[name] = run_id
        await store.append(
            RunStarted(run_id=run_id, seq=1, at=at, task=name, agents=(), requester=who, conversation=where)
        )
    await store.append(RunCancelled(run_id=ids["theirs"], seq=2, at=4.0, by="U2"))

    async def found(**filters: object) -> list[str]:
        return [s.task for s in await store.find(RunQuery(**filters))]  # type: ignore[arg-type]

    assert await found(channel=channel) == ["theirs", "mine"]
    assert await found(surface="slack", channel=channel, status="running") == ["mine"]
    assert await found(channel=channel, requester="U1") == ["mine"]
    assert [t for t in await found(requester="U1", limit=100) if t in ids] == ["away", "mine"]
    assert await found(channel=channel, limit=1) == ["theirs"]


async def test_a_runs_table_from_before_issue_8_is_brought_up_to_date(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    async with engine.begin() as conn:
        await conn.exec_driver_sql(
            "CREATE TABLE runs (run_id VARCHAR(64) PRIMARY KEY, task TEXT NOT NULL,"
            " status VARCHAR(16) NOT NULL, requester VARCHAR(255), started_at FLOAT NOT NULL,"
            " ended_at FLOAT, winner VARCHAR(64),"
            " salvage VARCHAR(64), cost_usd FLOAT NOT NULL, input_tokens INTEGER NOT NULL,"
            " output_tokens INTEGER NOT NULL, last_seq INTEGER NOT NULL)"
        )
        await conn.exec_driver_sql(
            "INSERT INTO runs VALUES ('old', 't', 'finished', 'U1', 1.0, 2.0, 'a0', NULL, 0, 0, 0, 9)"
        )
    store = await SqlRunStore.create(engine)
    old = await store.get("old")
    assert old is not None
    assert (old.status, old.team, old.conversation, old.final_answer) == ("finished", None, None, None)
    where = ConversationRef(surface="slack", channel="C1")
    await store.append(RunStarted(run_id="new", seq=1, at=3.0, task="t", agents=(), conversation=where))
    assert [s.run_id for s in await store.find(RunQuery(channel="C1"))] == ["new"]
    await engine.dispose()


def test_events_stored_under_their_old_kinds_still_load() -> None:
    old = (
        '{"kind": "approval_requested", "run_id": "r", "seq": 4, "at": 1.0, "agent_id": "a0",'
        ' "request_id": "apr_1", "action": "command(make)", "risk": "medium", "layer": "risk",'
        ' "reason": "?", "expires_at": 9.0}'
    )
    event = from_json(old)
    assert isinstance(event, ToolApprovalRequested)
    assert (event.kind, event.request_id) == ("tool_approval_requested", "apr_1")
    resolved = from_json(
        '{"kind": "approval_resolved", "agent_id": "a0", "request_id": "apr_1", "status": "denied"}'
    )
    assert resolved.kind == "tool_approval_resolved"
    with pytest.raises(ValidationError):
        from_json('{"kind": "no_such_kind"}')
