"""Batched: concurrent single-key lookups become one fetch; each caller gets its own value or error."""

from __future__ import annotations

import asyncio

import pytest

from bot.batched import Batched


class Fetches:
    """A fetch that records each call's keys and answers `key * 10` for keys it knows."""

    def __init__(self, known: set[int], gate: asyncio.Event | None = None) -> None:
        self.known = known
        self.gate = gate
        self.calls: list[list[int]] = []

    async def __call__(self, keys: list[int]) -> dict[int, int]:
        self.calls.append(list(keys))
        if self.gate is not None:
            await self.gate.wait()
        return {k: k * 10 for k in keys if k in self.known}


async def test_concurrent_gets_are_one_fetch_and_each_gets_its_value() -> None:
    fetch = Fetches(known={1, 2, 3})
    batched = Batched(fetch)
    values = await asyncio.gather(*(batched.get(k) for k in (1, 2, 3, 4, 2)))
    assert values == [10, 20, 30, None, 20]  # 4 is unknown: None; 2 asked twice, fetched once
    assert fetch.calls == [[1, 2, 3, 4]]


async def test_gets_during_a_fetch_form_the_next_batch() -> None:
    gate = asyncio.Event()
    fetch = Fetches(known={1, 2, 3}, gate=gate)
    batched = Batched(fetch)
    first = asyncio.ensure_future(batched.get(1))
    while not fetch.calls:  # the first batch's fetch is under way
        await asyncio.sleep(0)
    later = [asyncio.ensure_future(batched.get(k)) for k in (2, 3)]
    gate.set()
    assert await first == 10
    assert await asyncio.gather(*later) == [20, 30]
    assert fetch.calls == [[1], [2, 3]]


async def test_a_large_batch_is_fetched_in_chunks_of_the_limit() -> None:
    fetch = Fetches(known=set(range(7)))
    batched = Batched(fetch, limit=3)
    assert await asyncio.gather(*(batched.get(k) for k in range(7))) == [k * 10 for k in range(7)]
    assert fetch.calls == [[0, 1, 2], [3, 4, 5], [6]]


async def test_a_failed_fetch_fails_every_caller_of_its_batch_and_not_the_next() -> None:
    calls = 0

    async def flaky(keys: list[str]) -> dict[str, str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("database went away")
        return {k: k.upper() for k in keys}

    batched = Batched(flaky)
    results = await asyncio.gather(batched.get("a"), batched.get("b"), return_exceptions=True)
    assert [type(r) for r in results] == [ConnectionError, ConnectionError]
    assert await batched.get("a") == "A"


async def test_a_cancelled_caller_leaves_the_others_their_values() -> None:
    gate = asyncio.Event()
    fetch = Fetches(known={1, 2}, gate=gate)
    batched = Batched(fetch)
    gone = asyncio.ensure_future(batched.get(1))
    stays = asyncio.ensure_future(batched.get(2))
    while not fetch.calls:
        await asyncio.sleep(0)
    gone.cancel()
    gate.set()
    assert await stays == 20
    with pytest.raises(asyncio.CancelledError):
        await gone
