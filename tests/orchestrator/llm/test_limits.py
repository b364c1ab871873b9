"""The in-process limiter: its window (pure, times given), its slots, and `LocalLimits` on a real loop."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from orchestrator import CallLimit, LocalLimits, ProviderError
from orchestrator.llm import UserMessage, make_model_client
from orchestrator.llm.limits import Slots, Window, margin
from tests.fakes.provider_server import ProviderServer, Reply


@pytest.mark.parametrize(
    ("admitted", "now", "delay"),
    [
        ([], 0.0, 0.0),
        ([0.0], 0.5, 0.0),  # one of two: room
        ([0.0, 0.1], 0.5, 0.5),  # full until the first leaves at 1.0
        ([0.0, 0.1], 1.0, 0.0),  # half-open: the one at 0.0 counts in [0.0, 1.0) only
        ([0.0, 0.1], 1.05, 0.0),
        ([0.0, 0.2, 0.4], 0.5, 0.7),  # one noted past the limit: two must leave, the 2nd at 1.2
        ([0.0, 0.0], 0.0, 1.0),
    ],
)
def test_the_window_counts_the_admissions_of_its_span(
    admitted: list[float], now: float, delay: float
) -> None:
    window = Window(2, 1.0)
    for at in admitted:
        window.record(at)
    assert window.delay(now) == pytest.approx(delay)


def test_the_window_forgets_what_left_it() -> None:
    window = Window(1, 1.0)
    for at in range(100):
        window.record(float(at))
    assert len(window) == 1


def test_the_margin_is_a_fifth_of_the_period_up_to_half_a_second() -> None:
    assert margin(1.0) == pytest.approx(0.2)
    assert margin(60.0) == 0.5


async def test_slots_are_handed_out_in_order_and_a_waiter_that_gave_up_is_skipped() -> None:
    slots = Slots(1)
    await slots.take()
    order: list[str] = []

    async def take(name: str) -> None:
        await slots.take()
        order.append(name)

    first = asyncio.create_task(take("first"))
    quitter = asyncio.create_task(take("quitter"))
    last = asyncio.create_task(take("last"))
    await asyncio.sleep(0)  # let them queue up (a scheduling step, not a wait for time)
    quitter.cancel()
    slots.give()
    await first
    assert order == ["first"]
    slots.give()
    await last
    assert order == ["first", "last"]
    assert quitter.cancelled()
    assert slots.held == 1


LIMITS = {
    "openai": CallLimit(requests=2, period=0.5),
    "anthropic": CallLimit(concurrent=1),
    "groq": CallLimit(requests=1, period=30.0, concurrent=1),
}


async def test_requests_past_the_rate_wait_for_the_window() -> None:
    limits = LocalLimits(LIMITS)
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def one() -> None:
        async with limits.admit("openai", within=10):
            times.append(loop.time())

    await asyncio.gather(*(one() for _ in range(5)))
    span = 0.5 + margin(0.5)
    assert times[1] - times[0] < span / 2  # two at once
    assert times[2] - times[0] >= span  # the third once the first left the window
    assert times[4] - times[2] >= span


async def test_a_full_window_fails_at_once_when_it_will_not_open_in_time() -> None:
    limits = LocalLimits(LIMITS)
    loop = asyncio.get_running_loop()
    async with limits.admit("groq", within=10):
        pass
    begun = loop.time()
    with pytest.raises(TimeoutError, match="groq: its window is full"):
        async with limits.admit("groq", within=5):
            pytest.fail("admitted past the rate")
    assert loop.time() - begun < 1.0  # not at the deadline: the window opens only in 30 s


async def test_a_call_not_admitted_within_its_time_takes_nothing() -> None:
    limits = LocalLimits(LIMITS)
    loop = asyncio.get_running_loop()
    async with limits.admit("anthropic", within=10):
        begun = loop.time()
        with pytest.raises(TimeoutError):
            async with limits.admit("anthropic", within=0.2):
                pytest.fail("admitted past the concurrency limit")
        assert loop.time() - begun >= 0.2
    async with asyncio.timeout(1), limits.admit("anthropic", within=10):
        pass  # the slot is free again: the one that gave up took none


async def test_a_call_stuck_on_the_window_gives_its_slot_back() -> None:
    limits = LocalLimits(LIMITS)
    async with limits.admit("groq", within=10):
        pass
    with pytest.raises(TimeoutError):
        async with limits.admit("groq", within=5):
            pass
    with pytest.raises(TimeoutError, match="window"):  # the slot was free: the window said no again
        async with limits.admit("groq", within=5):
            pass


async def test_no_time_left_is_not_admitted() -> None:
    with pytest.raises(TimeoutError):
        async with LocalLimits(LIMITS).admit("openai", within=0):
            pass


async def test_a_provider_without_a_limit_is_never_held() -> None:
    limits = LocalLimits(LIMITS)
    async with contextlib.AsyncExitStack() as held:
        for _ in range(50):
            await held.enter_async_context(limits.admit("chatcompletion", within=0.01))


async def test_the_adapter_sends_nothing_when_not_admitted_in_time() -> None:
    limits = LocalLimits({"chatcompletion": CallLimit(concurrent=1)})
    async with ProviderServer(lambda _: Reply(text="ok")) as server:
        client = make_model_client(
            type="chatcompletion",
            model="m",
            base_url=server.openai_base_url,
            api_key="k",
            call_timeout_s=0.3,
            admission=limits,
        )
        async with limits.admit("chatcompletion", within=10):  # the only slot, held elsewhere
            with pytest.raises(ProviderError, match="not admitted within"):
                async for _ in client.stream_turn(system="", messages=[UserMessage(text="hi")], tools=[]):
                    pass
        await client.close()
        assert server.requests == []
