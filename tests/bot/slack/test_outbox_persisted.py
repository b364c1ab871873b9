"""Nothing lost, nothing twice: the outbox's posts in the bot's database, against the emulator."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import make_engine
from bot.errors import OutboxError
from bot.playground.emulator import Fault, Limits, SlackEmulator
from bot.slack.outbox import (
    MARKER_EVENT,
    PRIORITY_APPROVAL,
    PRIORITY_FINAL,
    PRIORITY_STATUS,
    PRIORITY_THREAD,
    GiveUp,
    Outbox,
    split_text,
)
from bot.slack.store import OutboxRow, OutboxStore

CHANNEL = "C0RUNS"
BUTTONS = [
    {
        "type": "actions",
        "elements": [{"type": "button", "action_id": "a", "text": {"type": "plain_text", "text": "Approve"}}],
    }
]


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator(limits=Limits(window=3.0, post_interval=0.05, post_burst=2)) as emulator:
        yield emulator
        emulator.assert_clean()


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'bot.db'}")
    await OutboxStore(engine).create_schema()
    yield engine
    await engine.dispose()


def make_outbox(slack: SlackEmulator, engine: AsyncEngine, **overrides: Any) -> Outbox:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url, timeout=5)
    options: dict[str, Any] = {"update_interval": 0.2, "channel_interval": 0.06, "budget_window": 3.0}
    options.update(overrides)
    return Outbox(client, store=OutboxStore(engine), **options)


def markers(slack: SlackEmulator, channel: str = CHANNEL) -> Counter[str]:
    """How many messages in `channel` carry each outbox marker."""
    found: Counter[str] = Counter()
    for message in slack.messages[channel].values():
        metadata = message.get("metadata") or {}
        if metadata.get("event_type") == MARKER_EVENT:
            found[str(metadata["event_payload"]["id"])] += 1
    return found


async def test_a_backlog_left_at_shutdown_is_sent_exactly_once_by_the_next_process(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    first = make_outbox(slack, engine, channel_interval=0.3)
    await first.start()
    root = first.post(CHANNEL, text="run started", run_id="run-1")
    replies = [first.post(CHANNEL, text=f"step {i}", thread=root, run_id="run-1") for i in range(6)]
    final = first.post(CHANNEL, text="the final answer", thread=root, priority=PRIORITY_FINAL, run_id="run-1")
    await root.ts()
    await first.close(drain=True, timeout=0.2)  # graceful shutdown with a backlog
    left = [r for r in await OutboxStore(engine).rows() if r.status == "pending"]
    assert len(left) >= 4
    with pytest.raises(OutboxError, match="kept"):
        await final.ts()

    second = make_outbox(slack, engine)
    await second.start()
    await second.flush()
    await second.close()
    rows = await OutboxStore(engine).rows()
    assert [r.status for r in rows] == ["sent"] * 8
    assert markers(slack) == Counter({r.id: 1 for r in rows})  # every post exactly once
    assert second.stats.resumed_posts == len(left)
    thread = [m["text"] for m in slack.thread(CHANNEL, str(root.known_ts))]
    assert thread[0] == "run started"
    assert "the final answer" in thread
    assert sorted(t for t in thread if t.startswith("step")) == [f"step {i}" for i in range(6)]
    assert all(r.known_ts is None or r.known_ts in slack.messages[CHANNEL] for r in replies)


async def test_a_post_in_flight_at_shutdown_is_looked_up_not_posted_again(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    first = make_outbox(slack, engine)
    await first.start()
    slack.answer_late("chat.postMessage", 1.0)  # Slack stores it; the answer never reaches this process
    ref = first.post(CHANNEL, text="final answer", priority=PRIORITY_FINAL, run_id="run-2")
    await slack.wait_for(lambda: bool(slack.messages[CHANNEL]))
    await first.close(drain=False)
    (row,) = await OutboxStore(engine).rows()
    assert (row.status, row.attempts) == ("pending", 1)
    assert ref.failed

    second = make_outbox(slack, engine)
    await second.start()
    await second.flush()
    await second.close()
    assert markers(slack) == Counter({row.id: 1})
    assert second.stats.duplicates_avoided == 1
    assert [r.status for r in await OutboxStore(engine).rows()] == ["sent"]


async def test_a_post_answered_after_the_client_timeout_is_not_posted_twice(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    box = make_outbox(slack, engine, call_timeout=0.2)
    await box.start()
    root = box.post(CHANNEL, text="root")
    await root.ts()
    slack.answer_late("chat.postMessage", 0.6)
    reply = box.post(CHANNEL, text="answer", thread=root)
    slack.answer_late("chat.postMessage", 0.6)
    top = box.post(CHANNEL, text="top-level answer")
    assert await reply.ts() in slack.messages[CHANNEL]
    assert await top.ts() in slack.messages[CHANNEL]
    await box.close()
    assert set(markers(slack).values()) == {1}
    assert len(slack.messages[CHANNEL]) == 3
    assert box.stats.duplicates_avoided == 2
    assert slack.calls_to("conversations.replies", ok=True)
    assert slack.calls_to("conversations.history", ok=True)


async def test_retryable_failures_are_retried_with_backoff(slack: SlackEmulator, engine: AsyncEngine) -> None:
    box = make_outbox(slack, engine)
    await box.start()
    slack.inject("chat.postMessage", Fault(retry_after=0.05, times=3))  # three 429s
    slack.inject("chat.postMessage", Fault(error="internal_error", status=500, retry_after=None))
    ref = box.post(CHANNEL, text="survives")
    assert await ref.ts() in slack.messages[CHANNEL]
    await box.close()
    assert box.stats.rate_limited == 3
    assert len(slack.messages[CHANNEL]) == 1


async def test_five_429s_and_a_500_on_chat_update_still_write_the_last_state(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    box = make_outbox(slack, engine, update_interval=0.02)
    await box.start()
    root = box.post(CHANNEL, text="Starting agents…")
    await root.ts()
    slack.inject("chat.update", Fault(retry_after=0.02, times=5))
    slack.inject("chat.update", Fault(error="internal_error", status=500, retry_after=None))
    box.update(root, text="✅ Finished")
    await box.flush()
    await box.close()
    assert slack.messages[CHANNEL][str(root.known_ts)]["text"] == "✅ Finished"
    assert box.stats.dropped_updates == 0


async def test_a_final_answer_refused_as_too_long_is_split_never_dropped(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    box = make_outbox(slack, engine)
    await box.start()
    root = box.post(CHANNEL, text="run")
    await root.ts()
    answer = "\n".join(f"line {i}: " + "x" * 60 for i in range(150))  # ~10k characters
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": answer}}]  # > 3000: invalid_blocks
    ref = box.post(CHANNEL, text="final answer", blocks=blocks, thread=root, priority=PRIORITY_FINAL)
    assert await ref.ts()
    await box.close()
    slack.violations.clear()  # the refused post was the point of this test
    pieces = [m["text"] for m in slack.thread(CHANNEL, str(root.known_ts))[1:]]
    assert len(pieces) == len(split_text(answer)) >= 3
    assert all(len(p) <= 4000 for p in pieces)
    assert "line 0:" in pieces[0]
    assert "line 149:" in pieces[-1]
    assert box.stats.split_posts == 1


async def test_a_give_up_is_logged_with_its_run_and_reported(
    slack: SlackEmulator, engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    box = make_outbox(slack, engine)
    given_up: list[GiveUp] = []
    box.on_give_up.append(given_up.append)
    await box.start()
    slack.inject("chat.postMessage", Fault(error="channel_not_found", status=200, retry_after=None))
    with caplog.at_level(logging.WARNING, logger="bot.slack.outbox"):
        ref = box.post(CHANNEL, text="approve?", blocks=BUTTONS, priority=PRIORITY_APPROVAL, run_id="run-9")
        with pytest.raises(OutboxError):
            await ref.ts()
        await box.close()
    assert [(g.run_id, g.error) for g in given_up] == [("run-9", "channel_not_found")]
    assert any(
        "run=run-9" in r.getMessage() and "channel_not_found" in r.getMessage() for r in caplog.records
    )
    assert [r.status for r in await OutboxStore(engine).rows()] == ["failed"]


async def test_a_wanted_state_not_yet_shown_at_shutdown_is_shown_by_the_next_process(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    first = make_outbox(slack, engine, update_interval=30.0, channel_interval=30.0)
    await first.start()
    root = first.post(CHANNEL, text="Starting agents…")
    await root.ts()
    first.update(root, text="working")  # sent at once
    await slack.wait_for(lambda: len(slack.calls_to("chat.update")) == 1)
    first.update(root, text="✅ Finished")  # waits out the update interval
    later = first.post(CHANNEL, text="second run")  # waits out the channel interval
    first.update(later, text="second run: ✅ Finished")
    await first.close(drain=True, timeout=0.2)
    assert slack.messages[CHANNEL][str(root.known_ts)]["text"] == "working"

    second = make_outbox(slack, engine)
    await second.start()
    await second.flush()
    await second.close()
    assert second.stats.resumed_updates == 2
    texts = sorted(m["text"] for m in slack.messages[CHANNEL].values())
    assert texts == ["second run: ✅ Finished", "✅ Finished"]

    third = make_outbox(slack, engine)  # nothing is left to send
    await third.start()
    await third.flush()
    await third.close()
    assert (third.stats.resumed_posts, third.stats.resumed_updates) == (0, 0)


async def test_a_timed_out_post_in_a_public_channel_the_bot_is_not_in_is_found_after_joining(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    slack.add_channel("C0PUBLIC", bot_member=False)  # posted to via chat:write.public
    box = make_outbox(slack, engine, call_timeout=0.2)
    await box.start()
    slack.answer_late("chat.postMessage", 0.6)
    ref = box.post("C0PUBLIC", text="run started")
    assert await ref.ts() in slack.messages["C0PUBLIC"]
    await box.close()
    assert len(slack.messages["C0PUBLIC"]) == 1
    assert [c.error for c in slack.calls_to("conversations.history")] == ["not_in_channel", None]
    assert slack.calls_to("conversations.join", ok=True)


async def test_a_restart_sends_only_its_own_backlog_and_a_takeover_adopts_a_dead_peers(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    """Two processes share the database: neither resends the other's unsent posts, until one is dead."""
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url, timeout=5)

    def owned(owner: str, **overrides: Any) -> Outbox:
        options: dict[str, Any] = {"update_interval": 0.2, "channel_interval": 0.06, "budget_window": 3.0}
        return Outbox(client, store=OutboxStore(engine, owner=owner), **(options | overrides))

    peer = owned("w2", channel_interval=5.0)  # a live peer whose backlog is still being sent
    await peer.start()
    first = peer.post(CHANNEL, text="peer's first", run_id="run-2")
    queued = [peer.post(CHANNEL, text=f"peer's {i}", run_id="run-2") for i in range(3)]
    await first.ts()
    restarted = owned("w1")
    await restarted.start()  # its own backlog is empty; the peer's is not its business
    await restarted.flush()
    assert sum(markers(slack).values()) == 1
    await peer.close(drain=False)  # the peer dies with its backlog saved
    assert await restarted.take_over(["w2"]) == len(queued)
    await restarted.flush()
    assert sorted(markers(slack).values()) == [1] * (1 + len(queued))  # each post exactly once
    assert await restarted.take_over(["w2"]) == 0  # nothing is taken twice
    await restarted.close()
    assert [r.status for r in await OutboxStore(engine).rows()] == ["sent"] * (1 + len(queued))


async def test_first_posts_of_many_runs_are_each_runs_first_post_of_the_priority_unless_it_failed(
    engine: AsyncEngine,
) -> None:
    store = OutboxStore(engine)

    def row(seq: int, run_id: str, priority: int, status: str = "pending") -> OutboxRow:
        return OutboxRow(
            id=f"p{seq}", seq=seq, channel=CHANNEL, kwargs={"text": str(seq)}, root_id=None, thread_ts=None,
            priority=priority, run_id=run_id, status=status, attempts=0, ts=None,
        )  # fmt: skip

    rows = [
        row(1, "run-a", PRIORITY_STATUS),
        row(2, "run-b", PRIORITY_STATUS, status="failed"),
        row(3, "run-a", PRIORITY_THREAD),
        row(4, "run-b", PRIORITY_THREAD),
        row(5, "run-a", PRIORITY_THREAD),
        row(6, "run-c", PRIORITY_THREAD),
    ]
    for saved in rows:
        await store.save(saved)
    runs = ["run-a", "run-b", "run-c", "run-none"]
    assert {r: p.id for r, p in (await store.first_posts(runs)).items()} == {"run-a": "p1", "run-c": "p6"}
    threads = await store.first_posts(runs, priority=PRIORITY_THREAD)
    assert {r: p.id for r, p in threads.items()} == {"run-a": "p3", "run-b": "p4", "run-c": "p6"}


async def _hide_table(engine: AsyncEngine, name: str, hidden: bool) -> None:
    """A real database fault: the outbox's table is renamed away (writes fail), then back."""
    old, new = (name, f"{name}_away") if hidden else (f"{name}_away", name)
    async with engine.begin() as conn:
        await conn.exec_driver_sql(f"ALTER TABLE {old} RENAME TO {new}")


async def test_a_post_waits_for_its_row_while_the_database_is_away_then_goes_once(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    box = make_outbox(slack, engine, retry_window=30.0, retry_max_delay=0.2)
    await box.start()
    await _hide_table(engine, "slack_outbox", True)
    ref = box.post(CHANNEL, text="the final answer", priority=PRIORITY_FINAL, run_id="run-1")
    await asyncio.sleep(1.0)
    assert markers(slack) == Counter()  # not sent unsaved: a restart would not know of it
    await _hide_table(engine, "slack_outbox", False)
    assert await box.saved([ref])
    ts = await ref.ts()
    await box.close()
    assert markers(slack) == Counter({ref.marker: 1})
    assert [(r.status, r.ts) for r in await OutboxStore(engine).rows()] == [("sent", ts)]


async def test_a_post_whose_row_cannot_be_written_is_not_sent_and_says_so(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    box = make_outbox(slack, engine, retry_window=0.6, retry_max_delay=0.1)
    given_up: list[GiveUp] = []
    box.on_give_up.append(given_up.append)
    await box.start()
    await _hide_table(engine, "slack_outbox", True)
    ref = box.post(CHANNEL, text="the final answer", priority=PRIORITY_FINAL, run_id="run-2")
    assert not await box.saved([ref])  # the step that implied it runs again and queues it again
    with pytest.raises(OutboxError):
        await ref.ts()
    await box.close()
    await _hide_table(engine, "slack_outbox", False)
    assert markers(slack) == Counter()
    assert [(g.run_id, g.error) for g in given_up] == [("run-2", "not_saved")]


def _owned(slack: SlackEmulator, engine: AsyncEngine, owner: str) -> Outbox:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url, timeout=5)
    options: dict[str, Any] = {"update_interval": 0.2, "channel_interval": 0.06, "budget_window": 3.0}
    return Outbox(client, store=OutboxStore(engine, owner=owner), **options)


async def test_a_keyed_post_goes_once_whoever_posts_it_and_however_often(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    one, two = _owned(slack, engine, "w1"), _owned(slack, engine, "w2")
    given_up: list[GiveUp] = []
    for box in (one, two):
        box.on_give_up.append(given_up.append)
        await box.start()
    first = one.post(CHANNEL, text="the final answer", priority=PRIORITY_FINAL, run_id="r", key="final:r:0")
    again = one.post(CHANNEL, text="the final answer", priority=PRIORITY_FINAL, run_id="r", key="final:r:0")
    assert again is first  # the same post, still on its way
    ts = await first.ts()
    later = one.post(CHANNEL, text="the final answer", priority=PRIORITY_FINAL, run_id="r", key="final:r:0")
    other = two.post(CHANNEL, text="the final answer", priority=PRIORITY_FINAL, run_id="r", key="final:r:0")
    for ref in (later, other):  # a step run again here, a second driver there
        with pytest.raises(OutboxError) as refused:
            await ref.ts()
        assert refused.value.error == "duplicate"
    assert await one.saved([later])  # saved: by whoever posted it
    assert await two.saved([other])
    await one.close()
    await two.close()
    assert markers(slack) == Counter({"final:r:0": 1})
    assert [r.ts for r in await OutboxStore(engine).rows()] == [ts]
    assert given_up == []  # nothing is missing: nobody is told so


async def test_a_post_whose_row_a_janitor_gave_away_is_sent_by_the_taker_only(
    slack: SlackEmulator, engine: AsyncEngine
) -> None:
    dead, taker = _owned(slack, engine, "w1"), _owned(slack, engine, "w2")
    await dead.start()
    await taker.start()
    slack.fail_for(1.0, methods=["chat.postMessage"])  # w1's post waits for Slack...
    ref = dead.post(CHANNEL, text="the answer", priority=PRIORITY_FINAL, run_id="r")
    assert await dead.saved([ref])
    assert await taker.take_over(["w1"]) == 1  # ...while a janitor judges w1 dead and takes its row
    with pytest.raises(OutboxError) as refused:
        await ref.ts()  # w1 lives on, but the row is w2's now: w1 does not send it
    assert refused.value.error == "taken"
    await taker.flush()
    await dead.close()
    await taker.close()
    assert markers(slack) == Counter({ref.marker: 1})
