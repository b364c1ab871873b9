"""Approval lifecycle figures: request/decide latency, 100-way contention, wake-up latency.

SQLite always; PostgreSQL too when DATABASE_URL_POSTGRES names a server (as `.ci/run` sets it).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from pathlib import Path

from approvals.models import Approvers, Ask, Decided, Principal
from approvals.permissions import Action
from approvals.service import ApprovalService
from approvals.sql import SqlApprovalStore, SqlAuditLog, create_schema, make_engine
from approvals.testing import ask_decision, scratch_postgres_database

VOTERS = [f"U{i:03d}" for i in range(100)]
APPROVERS = Approvers(users=frozenset(VOTERS))


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"p50 {statistics.median(ordered) * 1000:6.2f} ms  p95 {p95 * 1000:6.2f} ms  (n={len(ordered)})"


async def _timed(work: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


async def _ask(service: ApprovalService) -> str:
    request = await service.request(
        Ask(
            run_id="bench",
            agent_id="agent1",
            requester=None,
            action=Action(kind="command", target="make test"),
            digest="0" * 64,
            decision=ask_decision(),
            approvers=APPROVERS,
            timeout=timedelta(minutes=5),
        )
    )
    return request.id


async def _bench(label: str, url: str) -> None:
    engine = make_engine(url)
    await create_schema(engine)
    service = ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine), poll_interval=0.25)
    try:
        ids: list[str] = []
        asks = [await _timed(lambda: _append(ids, service)) for _ in range(200)]
        print(f"   {label:10} request()          {_ms(asks)}")
        decides = [
            await _timed(partial(service.decide, rid, Principal(id="U000"), approve=True)) for rid in ids
        ]
        print(f"   {label:10} decide() alone     {_ms(decides)}")
        await _contention(label, service)
        await _wakeup(label, service)
    finally:
        await engine.dispose()


async def _append(ids: list[str], service: ApprovalService) -> None:
    ids.append(await _ask(service))


async def _contention(label: str, service: ApprovalService) -> None:
    rounds = 5
    latencies: list[float] = []
    wall: list[float] = []
    for _ in range(rounds):
        request_id = await _ask(service)
        start = asyncio.Event()

        async def one(
            voter: str, request_id: str = request_id, start: asyncio.Event = start
        ) -> tuple[bool, float]:
            await start.wait()
            began = time.perf_counter()
            result = await service.decide(request_id, Principal(id=voter), approve=True)
            return isinstance(result, Decided), time.perf_counter() - began

        tasks = [asyncio.create_task(one(v)) for v in VOTERS]
        await asyncio.sleep(0)
        began = time.perf_counter()
        start.set()
        results = await asyncio.gather(*tasks)
        wall.append(time.perf_counter() - began)
        winners = Counter(won for won, _ in results)[True]
        assert winners == 1, f"{winners} winners"
        latencies.extend(t for _, t in results)
    print(
        f"   {label:10} 100-way race       {_ms(latencies)}; all 100 settled in {_ms(wall)}; 1 winner/round"
    )


async def _wakeup(label: str, service: ApprovalService) -> None:
    samples = []
    for _ in range(50):
        request_id = await _ask(service)
        waiter = asyncio.create_task(service.wait(request_id))
        await asyncio.sleep(0.001)
        began = time.perf_counter()
        await service.decide(request_id, Principal(id="U001"), approve=True)
        await waiter
        samples.append(time.perf_counter() - began)
    print(f"   {label:10} decide→wait() wake {_ms(samples)}")


async def _main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        await _bench("sqlite", f"sqlite:///{Path(directory) / 'bench.db'}")
    server = os.environ.get("DATABASE_URL_POSTGRES")
    if server:
        async with scratch_postgres_database(server) as url:
            await _bench("postgresql", url)
    else:
        print("   postgresql skipped (DATABASE_URL_POSTGRES unset)")


def main() -> None:
    asyncio.run(_main())


if __name__ == "__main__":
    main()
