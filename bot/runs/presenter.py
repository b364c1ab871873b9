"""One run's events → its Slack messages: the root status message, one progress message, the answer.

Per run the thread holds one progress message (answers, votes and tool calls, edited in place),
the approval requests and the final answer: Slack paces posts at about one per second per channel,
so a post per milestone made busy channels minutes late. The outbox coalesces edits (latest wins)
and paces posts, so this renders on every meaningful event and never awaits Slack inside the run's
event callback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bot.render.kit import context
from bot.runs.blocks import (
    OFF_LOOP_CHARS,
    Rendered,
    final_answer_messages,
    render_final_answer,
    status_blocks,
)
from bot.runs.progress import Progress, progress_blocks
from bot.slack.outbox import PRIORITY_FINAL, PRIORITY_THREAD, MessageRef, Outbox
from orchestrator import RunEvent, RunFailed, RunFinished, RunView

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

# Events that change nothing the status message shows (streamed text is not shown live).
_SILENT = frozenset({"text_delta", "final_delta", "tool_call"})


class RunRenderer:
    """Folds a run's events into a `RunView` and keeps the run's messages in step with it."""

    def __init__(
        self,
        outbox: Outbox,
        channel: str,
        root: MessageRef,
        thread: MessageRef | str,
        *,
        view: RunView,
        clock: Callable[[], float] = time.time,
        broadcast: bool = False,
        progress_after: float = 0.0,
        used: str = "",
    ) -> None:
        self._outbox = outbox
        self._used = used  # what the run used (repo, team, policy): a line on its status message
        self._channel = channel
        self.root = root
        self.thread = thread
        self.view = view
        self._clock = clock
        self._broadcast = broadcast
        self.progress = Progress()
        self.progress_message: MessageRef | None = None
        self._progress_after = progress_after
        self._progress_dirty = False
        self._opened = time.monotonic()
        self.last_event_at: float | None = None
        self.last_refresh = time.monotonic()
        self.final_posts: list[MessageRef] = []  # the final answer's messages, once queued
        self._final_render: asyncio.Task[None] | None = None  # a large answer rendering off the loop
        self._final_stored = False  # its posts were saved with the run's end (`save_final_within`)

    def on_event(self, event: RunEvent) -> None:
        """The run's subscriber: fold, then render (synchronous: the outbox queues, never blocks)."""
        self.view = self.view.apply(event)
        self.last_event_at = time.monotonic()
        if event.kind in _SILENT:
            return
        if self.progress.add(event, self.view):
            self._progress_dirty = True
            self.show_progress()
        if isinstance(event, RunFinished):
            self.post_final(event)
        self.refresh()

    def refresh(self) -> None:
        """Queue a status update with the current view (coalesced by the outbox)."""
        text, blocks = status_blocks(self.view, now=self._clock(), used=self._used)
        self.last_refresh = time.monotonic()
        self._outbox.update(self.root, text=text, blocks=blocks)

    def show_progress(self) -> None:
        """Post the progress message when due, then edit it (called per event, root post and tick).

        Due means: the thread exists and the run has gone on for `progress_after` seconds. A run
        that ends sooner never posts one (its status message showed each agent live, and its final
        answer carries the summary): one post fewer where posts are scarcest, a busy channel.
        """
        if not self._progress_dirty or self.progress.empty:
            return
        text, blocks = progress_blocks(self.progress, self.view)
        if self.progress_message is not None:
            self._outbox.update(self.progress_message, text=text, blocks=blocks)
        elif self._progress_due():
            self.progress_message = self._outbox.post(
                self._channel,
                text=text,
                blocks=blocks,
                thread=self.thread,
                priority=PRIORITY_THREAD,
                run_id=self.view.run_id or None,
            )
        else:
            return
        self._progress_dirty = False

    def _progress_due(self) -> bool:
        thread_known = isinstance(self.thread, str) or self.thread.known_ts is not None
        long_enough = time.monotonic() - self._opened >= self._progress_after
        return thread_known and long_enough and self.view.outcome is None

    def post_final(self, event: RunFinished) -> None:
        """Queue the final answer (in as many messages as it takes); `final_posts` names them.

        A large answer is rendered in a worker thread and queued when done; `finish` waits for it,
        so `final_posts` is complete once the run's end is handled. Posts saved with the run's end
        (`save_final_within`) are queued already.
        """
        # The answer waits for its thread: a root still queued behind other runs' goes out next.
        self._outbox.hasten(self.root, PRIORITY_FINAL)
        if self._final_stored:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop to keep responsive (a synchronous caller)
            large = False
        else:
            large = len(event.answer) >= OFF_LOOP_CHARS
        if large:
            self._final_render = asyncio.create_task(self._render_and_post(event, self.view))
        else:
            self._post_messages(final_answer_messages(event, self.view))

    async def save_final_within(self, conn: AsyncConnection, event: RunFinished) -> Callable[[], None]:
        """Save the final answer's posts in the transaction that stores the run's end (`event`).

        The transactional outbox: the end and the posts it implies commit together or not at all,
        so no crash can leave an end stored without its answer. What this returns queues the saved
        posts once the transaction commits; a piece whose key is saved already (another driver's,
        or a step run again) is not queued twice.
        """
        view = self.view.apply(event)
        messages = await render_final_answer(event, view)
        posts = [self._outbox.prepare(self._channel, **args) for args in self._final_args(messages, view)]
        saved = [post for post in posts if await self._outbox.save_within(conn, post)]

        def committed() -> None:
            self._final_stored = True
            self.final_posts.extend(self._outbox.enqueue(post) for post in saved)

        return committed

    async def _render_and_post(self, event: RunFinished, view: RunView) -> None:
        self._post_messages(await render_final_answer(event, view))

    def _post_messages(self, messages: list[Rendered]) -> None:
        for args in self._final_args(messages, self.view):
            self.final_posts.append(self._outbox.post(self._channel, **args))

    def _final_args(self, messages: list[Rendered], view: RunView) -> list[dict[str, Any]]:
        """Each final-answer message's post arguments (the progress summary on the first)."""
        out: list[dict[str, Any]] = []
        for i, (text, blocks) in enumerate(messages):
            if i == 0 and self.progress_message is None and not self.progress.empty:
                blocks = [*blocks[:2], context(self.progress.summary()), *blocks[2:]]
            out.append(
                {
                    "text": text,
                    "blocks": blocks,
                    "thread": self.thread,
                    "priority": PRIORITY_FINAL,
                    "broadcast": self._broadcast and i == 0,
                    "run_id": view.run_id or None,  # a give-up is logged with the run
                    # One final answer per run, whoever posts it (a step run again, a second driver).
                    "key": f"final:{view.run_id}:{i}" if view.run_id else None,
                }
            )
        return out

    def failed_to_start(self, error: str) -> None:
        """The runner refused the run (bad provider config, ...): show it as a failed run."""
        self.on_event(RunFailed(run_id=self.view.run_id, reasons={"run": f"could not start ({error})"}))

    async def finish(self) -> None:
        """After the terminal event: queue a final answer still rendering, then send the last status."""
        if self._final_render is not None:
            await self._final_render
        self.refresh()


def retire_status(outbox: Outbox, channel: str, root_ts: str, view: RunView, *, now: float) -> None:
    """Rewrite the status message of a run this process no longer drives (after a restart) to its end.

    Its Cancel / Finish now buttons would otherwise stay live for a run that no longer exists.
    """
    text, blocks = status_blocks(view, now=now)
    outbox.update(MessageRef.existing(channel, root_ts), text=text, blocks=blocks)
