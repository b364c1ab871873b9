"""Start-up's reconciliation of the runs a previous process left running and no engine holds.

A run the engine still holds resumes by itself (its workflow's step runs again); one it does not
(started before the engine, or whose workflow ended without a terminal event) would otherwise show
"running" for ever, with live buttons and open approval requests.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from approvals import ApprovalService

if TYPE_CHECKING:
    from bot.runs import RunHistory
    from bot.slack import Outbox

RESTARTED = "the bot restarted"


async def recover(
    history: RunHistory,
    approvals: ApprovalService,
    outbox: Outbox,
    *,
    held: Callable[[list[str]], Awaitable[Collection[str]]] | None = None,
) -> int:
    """Runs left running that no engine workflow will resume: mark them failed, cancel their asks.

    Runs the engine still holds (`held`: which of them are pending or queued, here or on another
    worker, asked in one query) are left alone: they resume, and a new instance never fails an old
    one's live runs. The rest (started before the engine, or whose workflow ended without a terminal
    event) are orphans. Cancelling rewrites their approval messages (the presenter finds them in the
    store), so nobody approves an action that no agent is waiting for any more.
    """
    from bot.runs import retire_status

    running = await history.left_running()
    alive = set() if held is None or not running else set(await held([run.run_id for run in running]))
    stale = [run for run in running if run.run_id not in alive]
    for run in stale:
        await history.mark_failed(run.run_id, RESTARTED)
        await approvals.cancel_run(run.run_id, RESTARTED)
        if run.root_ts:  # its status message loses the live Cancel / Finish now buttons
            retire_status(outbox, run.channel, run.root_ts, await history.view(run.run_id), now=time.time())
        if run.thread_ts:
            text = "⚠️ The bot restarted while this run was working; it was stopped. Start it again to retry."
            outbox.post(run.channel, text=text, thread=run.thread_ts)
    return len(stale)


__all__ = ["RESTARTED", "recover"]
