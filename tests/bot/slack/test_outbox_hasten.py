"""`Outbox.hasten`: a queued post jumps ahead, in the order posts were hastened; a sent one is left alone."""

from __future__ import annotations

from bot.playground.emulator import Limits, SlackEmulator
from bot.slack.outbox import PRIORITY_FINAL
from tests.bot.slack.test_outbox import make_outbox

CHANNEL = "C0BUSY"


async def test_hastened_roots_go_out_in_the_order_they_were_hastened() -> None:
    async with SlackEmulator(limits=Limits(window=3.0, post_interval=0.05, post_burst=2)) as slack:
        box = make_outbox(slack)
        roots = [box.post(CHANNEL, text=f"root {i}") for i in range(6)]
        box.hasten(roots[5], PRIORITY_FINAL)  # run 5 finished first...
        box.hasten(roots[3], PRIORITY_FINAL)  # ...then run 3
        await box.start()
        await box.flush()
        sent = [c.params["text"] for c in slack.calls_to("chat.postMessage", ok=True)]
        assert sent == ["root 5", "root 3", "root 0", "root 1", "root 2", "root 4"]
        box.hasten(roots[0], PRIORITY_FINAL)  # already sent: nothing happens
        await box.flush()
        assert len(slack.calls_to("chat.postMessage", ok=True)) == 6
        await box.close()
        slack.assert_clean()
