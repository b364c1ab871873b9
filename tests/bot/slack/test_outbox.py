"""The outbox against the Slack emulator with the real AsyncWebClient."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import OutboxError
from bot.playground.emulator import Fault, Limits, SlackEmulator
from bot.slack.outbox import PRIORITY_APPROVAL, MessageRef, Outbox

CHANNEL = "C0RUNS"


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    # Per-minute budgets squeezed into 3 s windows so the tests stay fast but still bite.
    limits = Limits(window=3.0, post_interval=0.05, post_burst=2)
    async with SlackEmulator(limits=limits) as emulator:
        yield emulator
        emulator.assert_clean()


def make_outbox(slack: SlackEmulator, **overrides: float) -> Outbox:
    timeout = overrides.pop("timeout", 5)
    # slack_sdk annotates `timeout` as int, but it is aiohttp's seconds and fractions work.
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url, timeout=timeout)  # type: ignore[arg-type]
    options: dict[str, float] = {
        "update_interval": 0.2, "channel_interval": 0.06, "budget_window": 3.0,
        "retry_window": 20.0, "retry_max_delay": 0.5,
    }  # fmt: skip
    options.update(overrides)
    return Outbox(client, **options)  # type: ignore[arg-type]


@pytest.fixture
async def outbox(slack: SlackEmulator) -> AsyncIterator[Outbox]:
    box = make_outbox(slack)
    await box.start()
    yield box
    await box.close()


def stored_text(slack: SlackEmulator, ref: MessageRef) -> str:
    return str(slack.messages[ref.channel][ref.known_ts or ""]["text"])


async def test_updates_coalesce_latest_state_wins(slack: SlackEmulator, outbox: Outbox) -> None:
    ref = outbox.post(CHANNEL, text="status 0")
    for i in range(1, 21):
        outbox.update(ref, text=f"status {i}")
    await outbox.flush()
    updates = slack.calls_to("chat.update")
    assert 1 <= len(updates) <= 2
    assert stored_text(slack, ref) == "status 20"
    assert outbox.stats.coalesced_updates >= 18


async def test_at_most_one_update_per_interval_per_message(slack: SlackEmulator, outbox: Outbox) -> None:
    ref = outbox.post(CHANNEL, text="v0")
    await ref.ts()

    def updates_reach(n: int) -> Callable[[], bool]:
        return lambda: len(slack.calls_to("chat.update", ok=True)) >= n

    for i in range(1, 5):
        outbox.update(ref, text=f"v{i}")
        await slack.wait_for(updates_reach(i))
    # Shown states only: on a loaded machine a call can time out and its state is sent again at once.
    times = [c.at for c in slack.calls_to("chat.update", ok=True)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) == 4
    # Sends are spaced by the interval; arrival jitter on a loaded machine eats a little of it.
    assert min(gaps) >= outbox.update_interval * 0.5, gaps
    assert stored_text(slack, ref) == "v4"


async def test_posts_are_paced_per_channel(slack: SlackEmulator, outbox: Outbox) -> None:
    refs = [outbox.post(CHANNEL, text=f"m{i}") for i in range(6)] + [outbox.post("C0OTHER", text="x")]
    await asyncio.gather(*(r.ts() for r in refs))
    times = [c.at for c in slack.calls_to("chat.postMessage") if c.params["channel"] == CHANNEL]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= outbox.channel_interval * 0.5, gaps
    # Another channel has its own pace: its post does not queue behind this channel's six.
    assert [c.params["channel"] for c in slack.calls_to("chat.postMessage")].index("C0OTHER") < 2


async def test_thread_order_kept_while_priority_jumps_ahead(slack: SlackEmulator, outbox: Outbox) -> None:
    root = outbox.post(CHANNEL, text="root")
    replies = [outbox.post(CHANNEL, text=f"r{i}", thread=root) for i in range(4)]
    urgent = outbox.post(CHANNEL, text="approval", thread=root, priority=PRIORITY_APPROVAL)
    other = outbox.post(CHANNEL, text="other run", priority=PRIORITY_APPROVAL)
    await asyncio.gather(*(r.ts() for r in [*replies, urgent, other]))
    order = [c.params["text"] for c in slack.calls_to("chat.postMessage")]
    # Same thread: strictly in order, whatever the priority; other threads may overtake.
    thread = [t for t in order if t in {"r0", "r1", "r2", "r3", "approval"}]
    assert thread == ["r0", "r1", "r2", "r3", "approval"]
    assert order.index("other run") < order.index("r1")
    assert all(slack.messages[CHANNEL][r.known_ts or ""]["thread_ts"] == root.known_ts for r in replies)


async def test_ephemeral_jumps_the_queue(slack: SlackEmulator, outbox: Outbox) -> None:
    refs = [outbox.post(CHANNEL, text=f"m{i}") for i in range(8)]
    await refs[0].ts()
    await outbox.ephemeral(CHANNEL, "U0CLICK", text="Only approvers can decide.")
    posted_before = len(slack.calls_to("chat.postMessage"))
    assert posted_before < 8
    await asyncio.gather(*(r.ts() for r in refs))


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll with a deadline (for state inside the outbox, which has no event to wait on)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_429_backs_off_every_caller_for_retry_after(slack: SlackEmulator, outbox: Outbox) -> None:
    refs = [outbox.post(CHANNEL, text=f"run{i}") for i in range(3)]
    await asyncio.gather(*(r.ts() for r in refs))
    slack.inject("chat.update", Fault(status=429, error="ratelimited", retry_after=0.6))
    outbox.update(refs[0], text="run0 done")
    await until(lambda: outbox.stats.rate_limited == 1)
    for i, ref in enumerate(refs[1:], start=1):
        outbox.update(ref, text=f"run{i} done")  # other runs: must wait out the same Retry-After
    await outbox.flush()
    updates = slack.calls_to("chat.update")
    limited = [c for c in updates if c.status == 429]
    assert len(limited) == 1
    after = [c.at - limited[0].at for c in updates if c is not limited[0]]
    assert len(after) == 3
    assert min(after) >= 0.6 * 0.95
    assert [stored_text(slack, r) for r in refs] == [f"run{i} done" for i in range(3)]


@pytest.mark.parametrize(
    ("fault", "threaded", "expect_lookups", "expect_posts"),
    [
        pytest.param(
            Fault(status=500, error="internal_error", commit=True), False, 1, 1, id="5xx-after-commit"
        ),
        pytest.param(
            Fault(status=500, error="internal_error", commit=True), True, 1, 1, id="5xx-after-commit-thread"
        ),
        pytest.param(Fault(status=503, error="service_unavailable"), False, 1, 2, id="5xx-not-stored"),
        pytest.param(Fault(error=None, commit=True, delay=0.8), True, 1, 1, id="timeout-after-commit"),
        pytest.param(Fault(status=429, error="ratelimited", retry_after=0.1), False, 0, 2, id="429-resent"),
        # The SDK's default retry handler would resend this one: the outbox's copy of the client has none.
        pytest.param(Fault(error=None, commit=True, drop=True), False, 1, 1, id="dropped-after-commit"),
        pytest.param(Fault(error=None, drop=True), True, 1, 2, id="dropped-before-commit"),
    ],
)
async def test_retries_never_duplicate_a_post(
    slack: SlackEmulator, fault: Fault, threaded: bool, expect_lookups: int, expect_posts: int
) -> None:
    box = make_outbox(slack, timeout=0.5)
    await box.start()
    try:
        root = box.post(CHANNEL, text="root")
        await root.ts()
        slack.inject("chat.postMessage", fault)
        ref = box.post(CHANNEL, text="the answer", thread=root if threaded else None)
        ts = await ref.ts()
    finally:
        await box.close()
    answers = [m for m in slack.messages[CHANNEL].values() if m["text"] == "the answer"]
    assert [m["ts"] for m in answers] == [ts]
    lookups = slack.calls_to("conversations.replies") + slack.calls_to("conversations.history")
    assert len(lookups) == expect_lookups
    # A late answer is recorded when it is sent, after the client gave up on it.
    await slack.wait_for(lambda: len(slack.calls_to("chat.postMessage")) == 1 + expect_posts)


async def test_an_unknown_outcome_is_looked_up_again_never_sent_on_a_guess(
    slack: SlackEmulator, outbox: Outbox
) -> None:
    slack.inject("chat.postMessage", Fault(status=500, error="internal_error", commit=True))
    slack.inject("conversations.history", Fault(status=500, error="internal_error", times=2))
    ref = outbox.post(CHANNEL, text="maybe posted")
    ts = await ref.ts()
    assert ts in slack.messages[CHANNEL]
    assert len(slack.calls_to("chat.postMessage")) == 1
    assert len(slack.calls_to("conversations.history")) == 3  # two failed look-ups, then found


async def test_an_outcome_still_unknown_at_the_end_of_the_window_gives_up_without_resending(
    slack: SlackEmulator,
) -> None:
    box = make_outbox(slack, retry_window=1.0)
    await box.start()
    try:
        slack.inject("chat.postMessage", Fault(status=500, error="internal_error", commit=True))
        slack.inject("conversations.history", Fault(status=500, error="internal_error", times=1000))
        ref = box.post(CHANNEL, text="maybe posted")
        with pytest.raises(OutboxError, match="outcome unknown"):
            await ref.ts()
        assert len(slack.calls_to("chat.postMessage")) == 1
    finally:
        slack.faults.clear()
        await box.close()


async def test_fatal_post_fails_ref_and_its_replies(slack: SlackEmulator, outbox: Outbox) -> None:
    root = outbox.post("not-a-channel", text="hello")
    reply = outbox.post("not-a-channel", text="reply", thread=root)
    with pytest.raises(OutboxError) as info:
        await root.ts()
    assert info.value.error == "channel_not_found"
    with pytest.raises(OutboxError, match="root"):
        await reply.ts()
    outbox.update(root, text="never sent")
    await outbox.flush()
    assert slack.calls_to("chat.update") == []


async def test_update_of_vanished_message_is_dropped(slack: SlackEmulator, outbox: Outbox) -> None:
    ref = MessageRef.existing(CHANNEL, "1700000000.000001")
    outbox.update(ref, text="x")
    await outbox.flush()
    assert outbox.stats.dropped_updates == 1
    assert slack.calls_to("chat.update", ok=False)[0].error == "message_not_found"


async def test_call_goes_through_budget(slack: SlackEmulator, outbox: Outbox) -> None:
    slack.usergroups["S0APPROVERS"] = ["U0ALICE", "U0BOB"]
    data = await outbox.call("usergroups.users.list", usergroup="S0APPROVERS")
    assert data["users"] == ["U0ALICE", "U0BOB"]
    with pytest.raises(OutboxError) as info:
        await outbox.call("usergroups.users.list", usergroup="S0NOPE")
    assert info.value.error == "no_such_subteam"
    assert outbox.stats.calls_by_method["usergroups.users.list"] == 2


async def test_close_fails_what_was_never_sent(slack: SlackEmulator) -> None:
    box = make_outbox(slack, channel_interval=10.0)
    await box.start()
    first, second = box.post(CHANNEL, text="a"), box.post(CHANNEL, text="b")
    await first.ts()
    await box.close(drain=True, timeout=0.2)
    with pytest.raises(OutboxError, match="closed"):
        await second.ts()
    with pytest.raises(OutboxError):
        box.post(CHANNEL, text="late")


async def test_fifty_concurrent_runs_in_one_channel_cause_no_429(slack: SlackEmulator) -> None:
    slack.limits.post_interval = 0.02
    box = make_outbox(slack, update_interval=0.1, channel_interval=0.025)
    await box.start()

    async def run(n: int) -> MessageRef:
        # Status keeps changing while the run posts into its thread, so all 50 messages want
        # updates at once: the shared chat.update budget, not the work, is the bottleneck.
        root = box.post(CHANNEL, text=f"run {n}: starting")
        for step in range(2):
            box.update(root, text=f"run {n}: step {step}")
            await box.post(CHANNEL, text=f"run {n}: answer {step}", thread=root).ts()
            box.update(root, text=f"run {n}: voting {step}")
        box.post(CHANNEL, text=f"run {n}: final", thread=root, priority=PRIORITY_APPROVAL)
        box.update(root, text=f"run {n}: done")
        return root

    roots = await asyncio.gather(*(run(n) for n in range(50)))
    await box.flush()
    await box.close()
    assert not [c for c in slack.calls if c.status == 429]
    assert box.stats.rate_limited == 0
    assert [stored_text(slack, r) for r in roots] == [f"run {n}: done" for n in range(50)]
    assert len(slack.calls_to("chat.postMessage")) == 50 * 4
    assert box.stats.coalesced_updates > 0


async def test_refs_to_the_same_message_share_one_slot(slack: SlackEmulator, outbox: Outbox) -> None:
    ref = outbox.post(CHANNEL, text="approval")
    outbox.update(ref, text="pending 1")  # queued before the ts is known
    ts = await ref.ts()
    for i in range(5):
        outbox.update(MessageRef.existing(CHANNEL, ts), text=f"decided {i}")
    await outbox.flush()
    assert len(slack.calls_to("chat.update")) <= 2
    assert stored_text(slack, ref) == "decided 4"


async def test_thread_named_by_ts_string_keeps_order_across_priorities(
    slack: SlackEmulator, outbox: Outbox
) -> None:
    root_ts = await outbox.post(CHANNEL, text="started in a thread").ts()
    low = [outbox.post(CHANNEL, text=f"step {i}", thread=root_ts) for i in range(3)]
    final = outbox.post(CHANNEL, text="final", thread=root_ts, priority=PRIORITY_APPROVAL)
    await asyncio.gather(*(r.ts() for r in [*low, final]))
    order = [c.params["text"] for c in slack.calls_to("chat.postMessage")][1:]
    assert order == ["step 0", "step 1", "step 2", "final"]


async def test_close_without_drain_fails_a_post_in_flight(slack: SlackEmulator) -> None:
    box = make_outbox(slack)
    await box.start()
    slack.inject("chat.postMessage", Fault(error=None, commit=True, delay=1.0))
    ref = box.post(CHANNEL, text="slow")
    await until(lambda: box.stats.calls_by_method["chat.postMessage"] == 1)  # the post is on the wire
    await box.close(drain=False)
    with pytest.raises(OutboxError, match="closed"):
        await ref.ts()
