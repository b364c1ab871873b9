"""A run's end and its final answer's posts are one commit (the transactional outbox).

The outbox table refuses the final answer's rows (a SQLite trigger) for a while: the run's end
is then not stored either, and the run waits at that write (fail-stop persistence) rather than
ending without its answer. Once the rows can be written, the end and the answer commit together
and the answer reaches Slack once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.bot.harness import bot_harness

REFUSE = """
CREATE TRIGGER refuse_final BEFORE INSERT ON slack_outbox
WHEN NEW.id LIKE 'final:%' AND (SELECT refusing FROM refusal) = 1
BEGIN SELECT RAISE(ABORT, 'the disk is full'); END
"""


async def _stored(bot: object, sql: str) -> int:
    engine = bot.services.storage.engine  # type: ignore[attr-defined]
    async with engine.connect() as conn:
        return int((await conn.execute(text(sql))).scalar_one())


async def test_a_runs_end_is_not_stored_while_its_answer_cannot_be(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with bot_harness(tmp_path, agents=2) as bot:
        engine = bot.services.storage.engine
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE refusal (refusing INTEGER)"))
            await conn.execute(text("INSERT INTO refusal VALUES (1)"))
            await conn.execute(text(REFUSE))
        await bot.command("say hello")
        ended = "SELECT count(*) FROM run_events WHERE kind = 'finished'"
        async with asyncio.timeout(30):
            # The write holding the run's end is refused (and retried: the run waits at it).
            while not [r for r in caplog.records if "the disk is full" in r.getMessage()]:
                await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # a retry or two more
        assert await _stored(bot, ended) == 0, "the end was stored without its answer"
        assert not [p for p in bot.posts() if "Final answer" in str(p.params.get("text"))]
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE refusal SET refusing = 0"))
        await bot.settle(timeout=30)
        assert await _stored(bot, ended) == 1
        finals = [p for p in bot.posts() if str(p.params.get("text")).startswith("Final answer")]
        assert len(finals) == 1
        assert await _stored(bot, "SELECT count(*) FROM slack_outbox WHERE id LIKE 'final:%'") == 1
