"""100 simultaneous decisions on one request: exactly one wins, on SQLite and on PostgreSQL.

Two service instances over two separate engines stand in for two bot replicas (or a replica and
the CLI): nothing but the database's compare-and-set arbitrates between them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals.models import (
    AlreadyDecided,
    ApprovalRequest,
    Approvers,
    Ask,
    Decided,
    DecideResult,
    Principal,
    QuorumPending,
)
from approvals.permissions import Action
from approvals.service import ApprovalService
from approvals.sql import SqlApprovalStore, SqlAuditLog, create_schema, make_engine
from approvals.testing import ask_decision

VOTERS = [f"U{i:03d}" for i in range(100)]


@pytest.fixture
async def engines(database_url: str) -> AsyncIterator[list[AsyncEngine]]:
    engines = [make_engine(database_url) for _ in range(2)]
    await create_schema(engines[0])
    yield engines
    for engine in engines:
        await engine.dispose()


@pytest.fixture
def replicas(engines: list[AsyncEngine]) -> list[ApprovalService]:
    return [ApprovalService(SqlApprovalStore(e), SqlAuditLog(e)) for e in engines]


async def race(replicas: list[ApprovalService], request_id: str, approve: list[bool]) -> list[DecideResult]:
    """Release 100 decisions at once, alternating between the replicas."""
    start = asyncio.Event()

    async def one(i: int) -> DecideResult:
        await start.wait()
        service = replicas[i % len(replicas)]
        return await service.decide(
            request_id, Principal(id=VOTERS[i]), approve=approve[i], reason=f"vote {i}"
        )

    tasks = [asyncio.create_task(one(i)) for i in range(len(VOTERS))]
    await asyncio.sleep(0)  # every task is now parked on the barrier
    start.set()
    return await asyncio.gather(*tasks)


async def open_request(service: ApprovalService, quorum: int = 1) -> ApprovalRequest:
    return await service.request(
        Ask(
            run_id="run-race",
            agent_id="agent1",
            requester="U_REQ",
            action=Action(kind="command", target="git push origin main"),
            digest="e" * 64,
            decision=ask_decision(),
            approvers=Approvers(users=frozenset(VOTERS), quorum=quorum),
            timeout=timedelta(minutes=5),
        )
    )


async def test_exactly_one_of_100_simultaneous_decisions_wins(
    replicas: list[ApprovalService], engines: list[AsyncEngine]
) -> None:
    request = await open_request(replicas[0])
    approve = [i % 2 == 0 for i in range(len(VOTERS))]  # half approve, half deny
    results = await race(replicas, request.id, approve)

    winners = [r for r in results if isinstance(r, Decided)]
    assert len(winners) == 1
    assert Counter(type(r).__name__ for r in results) == {"Decided": 1, "AlreadyDecided": 99}
    winner = winners[0].request
    stored = await replicas[1].get(request.id)
    assert stored == winner
    assert all(r.request == winner for r in results if isinstance(r, AlreadyDecided))
    winner_index = VOTERS.index(winner.decided_by or "")
    assert winner.status == ("approved" if approve[winner_index] else "denied")

    trail = await SqlAuditLog(engines[0]).query(run_id="run-race")
    outcomes = Counter(e.outcome for e in trail)
    assert outcomes == {"ask": 1, winner.status: 1, "rejected": 99}
    assert [e.actor for e in trail if e.outcome == winner.status] == [winner.decided_by]


async def test_quorum_of_three_under_100_simultaneous_approvals(replicas: list[ApprovalService]) -> None:
    request = await open_request(replicas[0], quorum=3)
    results = await race(replicas, request.id, [True] * len(VOTERS))

    counts = Counter(type(r).__name__ for r in results)
    assert counts == {"Decided": 1, "QuorumPending": 2, "AlreadyDecided": 97}
    stored = await replicas[0].get(request.id)
    assert stored is not None
    assert stored.status == "approved"
    assert len(set(stored.approvals_so_far)) == 3
    counted = {r.request.approvals_so_far[-1] for r in results if isinstance(r, Decided | QuorumPending)}
    assert counted == set(stored.approvals_so_far)


_VOTER_PROCESS = """
import asyncio, json, os, pathlib, sys, time
from approvals.models import Principal
from approvals.service import ApprovalService
from approvals.sql import SqlApprovalStore, SqlAuditLog, make_engine

url, request_id, go, ready = sys.argv[1:5]
first, count = int(sys.argv[5]), int(sys.argv[6])

async def main():
    engine = make_engine(url)
    service = ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine))
    await service.get(request_id)  # connect before the starting gun
    pathlib.Path(ready).touch()
    deadline = time.monotonic() + 30
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise SystemExit("no start signal")
        await asyncio.sleep(0.001)
    voters = [Principal(id=f"U{i:03d}") for i in range(first, first + count)]
    results = await asyncio.gather(*(service.decide(request_id, v, approve=True) for v in voters))
    await engine.dispose()
    print(json.dumps([r.kind for r in results]))

asyncio.run(main())
"""


async def test_exactly_one_wins_across_two_os_processes_on_sqlite(tmp_path: Path) -> None:
    """SQLite's file locks (WAL + busy_timeout) arbitrate between real processes too: 50 + 50 votes."""
    url = f"sqlite:///{tmp_path}/approvals.db"
    engine = make_engine(url)
    await create_schema(engine)
    service = ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine))
    try:
        request = await open_request(service)
        go, ready = tmp_path / "go", tmp_path / "ready"
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _VOTER_PROCESS, url, request.id, str(go), str(ready), "50", "50",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            while not ready.exists() and child.returncode is None:
                await asyncio.sleep(0.01)
        go.touch()
        mine = await asyncio.gather(
            *(service.decide(request.id, Principal(id=VOTERS[i]), approve=True) for i in range(50))
        )
        out, err = await asyncio.wait_for(child.communicate(), 60)
        assert child.returncode == 0, err.decode()
        kinds = Counter(r.kind for r in mine) + Counter(json.loads(out))
        assert kinds == {"decided": 1, "already_decided": 99}
        stored = await service.get(request.id)
        assert stored is not None
        assert stored.status == "approved"
        trail = await SqlAuditLog(engine).query()
        assert Counter(e.outcome for e in trail) == {"ask": 1, "approved": 1, "rejected": 99}
    finally:
        await engine.dispose()
