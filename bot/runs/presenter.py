"""One run's events → its Slack messages: the root status message (updated in place) and thread posts.

The outbox coalesces status updates (latest wins) and paces posts, so this renders on every
meaningful event and never awaits Slack inside the run's event callback.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bot.runs.blocks import (
    agent_failed_blocks,
    answer_blocks,
    final_answer_messages,
    restart_blocks,
    status_blocks,
    tool_batch_blocks,
    vote_blocks,
    vote_ignored_blocks,
)
from bot.slack.outbox import MessageRef, Outbox
from orchestrator import RunEvent, RunFailed, RunView, ToolDecided

# Events that change nothing the status message shows (streamed text is not shown live).
_SILENT = frozenset({"text_delta", "final_delta", "tool_call"})
TOOL_BATCH = 10  # tool decisions per thread message...
TOOL_BATCH_SECONDS = 10.0  # ...or whatever has waited this long; otherwise at the next milestone


class RunRenderer:
    """Folds a run's events into a `RunView` and turns milestones into Slack messages."""

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
    ) -> None:
        self._outbox = outbox
        self._channel = channel
        self.root = root
        self.thread = thread
        self.view = view
        self._clock = clock
        self._broadcast = broadcast
        self._tools: list[ToolDecided] = []
        self._tools_since = 0.0
        self.last_event_at: float | None = None
        self.last_refresh = time.monotonic()

    def on_event(self, event: RunEvent) -> None:
        """The run's subscriber: fold, then render (synchronous: the outbox queues, never blocks)."""
        self.view = self.view.apply(event)
        self.last_event_at = time.monotonic()
        if event.kind in _SILENT:
            return
        if isinstance(event, ToolDecided):
            if not self._tools:
                self._tools_since = time.monotonic()
            self._tools.append(event)
            if len(self._tools) >= TOOL_BATCH or time.monotonic() - self._tools_since >= TOOL_BATCH_SECONDS:
                self._flush_tools()
        else:
            self._thread_post(event)
        self.refresh()

    def refresh(self) -> None:
        """Queue a status update with the current view (coalesced by the outbox)."""
        text, blocks = status_blocks(self.view, now=self._clock())
        self.last_refresh = time.monotonic()
        self._outbox.update(self.root, text=text, blocks=blocks)

    def _post(
        self, text: str, blocks: list[dict[str, Any]], *, priority: int = 0, broadcast: bool = False
    ) -> None:
        self._outbox.post(
            self._channel,
            text=text,
            blocks=blocks,
            thread=self.thread,
            priority=priority,
            broadcast=broadcast,
        )

    def _thread_post(self, event: RunEvent) -> None:
        rendered: tuple[str, list[dict[str, Any]]] | None = None
        if event.kind == "answer":
            rendered = answer_blocks(event, run_id=self.view.run_id)
        elif event.kind == "vote":
            rendered = vote_blocks(event, self.view)
        elif event.kind == "vote_ignored":
            rendered = vote_ignored_blocks(event, self.view)
        elif event.kind == "restart":
            rendered = restart_blocks(event, self.view)
        elif event.kind == "agent_failed":
            rendered = agent_failed_blocks(event, self.view)
        elif event.kind == "finished":
            self._flush_tools()
            for i, (text, blocks) in enumerate(final_answer_messages(event, self.view)):
                self._post(text, blocks, priority=5, broadcast=self._broadcast and i == 0)
            return
        elif event.kind in {"failed", "cancelled"}:
            self._flush_tools()
            return
        if rendered is not None:
            self._flush_tools()
            self._post(*rendered)

    def _flush_tools(self) -> None:
        if self._tools:
            batch, self._tools = self._tools, []
            self._post(*tool_batch_blocks(batch, self.view))

    def failed_to_start(self, error: str) -> None:
        """The runner refused the run (bad provider config, ...): show it as a failed run."""
        self.on_event(RunFailed(run_id=self.view.run_id, reasons={"run": f"could not start ({error})"}))

    async def finish(self) -> None:
        """After the terminal event: flush what is buffered and send the last status."""
        self._flush_tools()
        self.refresh()
