"""A Slack outage longer than the old retries: posts and updates wait it out, once each; past the
window they are given up and said so; Slack's Retry-After on a 503 is honoured.

The real `AsyncWebClient` against the emulator, whose `fail_for` answers every call with a 503
for a while (nothing takes effect meanwhile), as Slack's edge does during an incident.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.errors import OutboxError
from bot.playground.emulator import Limits, SlackEmulator
from bot.slack.outbox import GiveUp, Outbox
from tests.bot.slack.test_outbox import CHANNEL, make_outbox


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator(limits=Limits(window=3.0, post_interval=0.05, post_burst=2)) as emulator:
        yield emulator
        emulator.assert_clean()


async def _started(slack: SlackEmulator, **overrides: float) -> Outbox:
    box = make_outbox(slack, **overrides)
    await box.start()
    return box


async def test_posts_and_updates_made_during_an_outage_arrive_once_when_it_ends(slack: SlackEmulator) -> None:
    # The old outbox gave a post five attempts (about 4 s of backoff here): this outage is longer.
    box = await _started(slack, retry_window=30.0, retry_max_delay=0.5)
    try:
        root = box.post(CHANNEL, text="status")
        await root.ts()
        slack.fail_for(6.0)
        replies = [box.post(CHANNEL, text=f"reply {i}", thread=root) for i in range(3)]
        other = box.post(CHANNEL, text="another run")
        box.update(root, text="status, edited during the outage")
        await asyncio.sleep(5.0)
        assert not any(r.known_ts for r in replies), "nothing can arrive while Slack answers 503"
        for ref in [*replies, other]:
            await asyncio.wait_for(ref.ts(), 20)
        await box.flush()
    finally:
        await box.close()
    texts = [str(m.get("text")) for m in slack.messages[CHANNEL].values()]
    assert sorted(texts) == sorted(
        ["status, edited during the outage", "reply 0", "reply 1", "reply 2", "another run"]
    )
    assert len(slack.calls_to("chat.postMessage", ok=True)) == 5
    assert box.stats.given_up == 0


async def test_an_outage_longer_than_the_window_gives_the_post_up_once(slack: SlackEmulator) -> None:
    box = await _started(slack, retry_window=1.5, retry_max_delay=0.3)
    given_up: list[GiveUp] = []
    box.on_give_up.append(given_up.append)
    try:
        slack.fail_for(30.0)
        ref = box.post(CHANNEL, text="lost", run_id="run-1")
        with pytest.raises(OutboxError, match="outcome unknown"):  # 503s: it may have arrived
            await asyncio.wait_for(ref.ts(), 20)
        assert [(g.run_id, g.channel) for g in given_up] == [("run-1", CHANNEL)]
        # Never re-sent while its outcome is unknown; the look-ups backed off, not hammered.
        assert len(slack.calls_to("chat.postMessage")) == 1
        assert 2 <= len(slack.calls_to("conversations.history")) <= 30
    finally:
        slack.end_outage()
        await box.close()
    assert CHANNEL not in slack.messages or not slack.messages[CHANNEL]


async def test_retry_after_on_a_503_is_waited_for(slack: SlackEmulator) -> None:
    box = await _started(slack, retry_window=30.0, retry_max_delay=0.1)
    try:
        slack.fail_for(0.5, retry_after=2.0, methods=["chat.postMessage"])
        ref = box.post(CHANNEL, text="after the pause")
        await asyncio.wait_for(ref.ts(), 20)
    finally:
        await box.close()
    calls = slack.calls_to("chat.postMessage")
    assert [c.status for c in calls] == [503, 200], "one try, then one after Retry-After"
    assert calls[1].at - calls[0].at >= 1.9
