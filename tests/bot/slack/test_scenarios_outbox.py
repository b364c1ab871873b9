"""Scenarios over signed requests: a bot stopped with a backlog loses nothing, the next one sends it once."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from approvals import make_engine
from bot.playground.emulator import SlackEmulator
from bot.slack.outbox import MARKER_EVENT, PRIORITY_FINAL
from bot.slack.store import OutboxRow, OutboxStore
from tests.bot.harness import APPROVER, CHANNEL, FAST, REQUESTER, TOKEN, bot_harness, scaled_limits


async def outbox_rows(database_url: str) -> list[OutboxRow]:
    engine = make_engine(database_url)
    try:
        return await OutboxStore(engine).rows()
    finally:
        await engine.dispose()


def marker_counts(slack: SlackEmulator) -> Counter[str]:
    found: Counter[str] = Counter()
    for message in slack.messages[CHANNEL].values():
        metadata = message.get("metadata") or {}
        if metadata.get("event_type") == MARKER_EVENT:
            found[str(metadata["event_payload"]["id"])] += 1
    return found


async def test_a_backlog_at_graceful_shutdown_is_sent_once_by_the_next_bot_final_answers_included(
    tmp_path: Path,
) -> None:
    database_url = f"sqlite:///{tmp_path / 'bot.db'}"
    slow = replace(FAST, channel_interval=1.0)  # ~1 post per second in the channel: a backlog builds
    emulator = SlackEmulator(bot_token=TOKEN, allowed_mentions={APPROVER, REQUESTER}, limits=scaled_limits())
    async with emulator as slack:
        async with bot_harness(
            tmp_path, slack=slack, options=slow, database_url=database_url, grace=0.2
        ) as bot:
            for i in range(3):
                assert (await bot.command(f"summarise report {i}"))[0] == 200
            await bot.services.tasks.wait_idle(within=30)  # the runs ended; their posts wait in the outbox
        left = [r for r in await outbox_rows(database_url) if r.status == "pending"]
        assert any(r.priority == PRIORITY_FINAL for r in left)  # final answers were in the backlog

        async with bot_harness(tmp_path, slack=slack, database_url=database_url) as again:
            await again.settle(timeout=30)
            assert again.services.outbox.stats.resumed_posts == len(left)
        rows = await outbox_rows(database_url)
        assert {r.status for r in rows} == {"sent"}
        assert marker_counts(slack) == Counter({r.id: 1 for r in rows})  # each post exactly once
        finals = [r for r in rows if r.priority == PRIORITY_FINAL]
        assert len({r.run_id or r.thread_ts for r in finals}) >= 3
        assert all(r.ts in slack.messages[CHANNEL] for r in finals)
