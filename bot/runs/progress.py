"""A run's one live progress message in its thread: answers, votes and tool calls, updated in place.

Slack paces posts at about one per second per channel, so a thread post per answer, vote and tool
batch made busy channels minutes late (issue 9, item 8). A run now posts its status message, this
one progress message (edited as the run goes), its approval requests and its final answer.
`Progress` is the pure log the message renders; the presenter decides when to post and update it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.render import ids
from bot.render.escape import code, safe
from bot.render.kit import Block, actions, button, context, section
from bot.render.redact import redact
from orchestrator import RunEvent, RunView, ToolDecided

Rendered = tuple[str, list[Block]]
LOG_LINES = 12  # the newest lines shown; older ones are counted
TOOL_LINES = 5  # the newest tool decisions shown
MAX_ANSWER_BUTTONS = 10
_DECISION_ICON = {"allow": "✅", "ask": "✋", "deny": "⛔"}
_OVER = {
    "finished": "✅ Finished: the final answer follows.",
    "failed": "❌ Failed.",
    "cancelled": "🚫 Cancelled.",
}


def deferred(event: ToolDecided) -> bool:
    """A side effect held back during coordination for the winner to perform (not a denial)."""
    return not event.executed and event.reason.startswith("deferred")


def tool_line(event: ToolDecided, view: RunView) -> str:
    """One tool decision: what was asked, and what happened to it."""
    who = safe(view.label(event.agent_id), 40)
    if deferred(event):
        return f"⏸ *{who}* {code(event.action, 180)} → deferred to the winner (performed in the final phase)"
    icon = _DECISION_ICON.get(event.decision, "•")
    ran = "" if event.executed else ", not run"
    return (
        f"{icon} *{who}* {code(event.action, 180)} → {safe(event.decision, 10)} ({safe(event.risk, 10)}{ran})"
    )


@dataclass(slots=True)
class Progress:
    """What the progress message shows; `add` says whether an event changed it."""

    lines: list[str] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)  # agent id -> its latest answer label
    tools: list[str] = field(default_factory=list)
    answer_count: int = 0
    vote_count: int = 0
    ran: int = 0
    refused: int = 0
    held: int = 0

    @property
    def empty(self) -> bool:
        return not (self.lines or self.tools)

    def add(self, event: RunEvent, view: RunView) -> bool:
        """Fold one event in; False when the message would not change."""
        if isinstance(event, ToolDecided):
            self._tool(event, view)
            return True
        line = self._line(event, view)
        if line is None:
            return False
        self.lines.append(line)
        return True

    def _tool(self, event: ToolDecided, view: RunView) -> None:
        if deferred(event):
            self.held += 1
        elif event.executed:
            self.ran += 1
        else:
            self.refused += 1
        self.tools.append(tool_line(event, view))

    def _line(self, event: RunEvent, view: RunView) -> str | None:
        if event.kind == "answer":
            self.answer_count += 1
            self.answers[event.agent_id] = event.label
            preview = safe(" ".join(redact(event.content).split()), 200)
            return f"📝 *{safe(event.label, 40)}* submitted an answer: {preview}"
        if event.kind == "vote":
            self.vote_count += 1
            who, whom = safe(view.label(event.agent_id), 40), safe(event.voted_for_label, 40)
            reason = safe(" ".join(event.reason.split()), 200)
            return f"🗳️ *{who}* votes for *{whom}*" + (f": {reason}" if reason else "")
        if event.kind == "vote_ignored":
            who, whom = safe(view.label(event.agent_id), 40), safe(view.label(event.voted_for), 40)
            return f"⚠️ Vote by *{who}* for *{whom}* ignored: {safe(event.reason, 200)}"
        if event.kind == "restart":
            return f"↻ *{safe(view.label(event.agent_id), 40)}* restarts: {safe(event.reason, 200)}"
        if event.kind == "agent_failed":
            return f"❌ *{safe(view.label(event.agent_id), 40)}* failed: {safe(event.reason, 300)}"
        if event.kind in _OVER:
            return _OVER[event.kind]
        return None

    def summary(self) -> str:
        """One line of counts (also shown under a final answer when no progress message was posted)."""
        parts = [
            f"{self.answer_count} answer{'s' if self.answer_count != 1 else ''}",
            f"{self.vote_count} vote{'s' if self.vote_count != 1 else ''}",
        ]
        calls = self.ran + self.refused + self.held
        if calls:
            detail = [f"{self.ran} ran"]
            if self.refused:
                detail.append(f"{self.refused} refused")
            if self.held:
                detail.append(f"{self.held} deferred to the winner")
            parts.append(f"{calls} tool call{'s' if calls != 1 else ''} ({', '.join(detail)})")
        return " · ".join(parts)


def progress_blocks(progress: Progress, view: RunView) -> Rendered:
    """The progress message: counts, the newest lines, the newest tool calls, "Show full" per answer."""
    blocks: list[Block] = [section(f"*Progress* · {progress.summary()}")]
    earlier = len(progress.lines) - LOG_LINES
    if earlier > 0:
        blocks.append(context(f"… {earlier} earlier event{'s' if earlier != 1 else ''}"))
    if progress.lines:
        blocks.append(section("\n".join(progress.lines[-LOG_LINES:])))
    if progress.tools:
        older = len(progress.tools) - TOOL_LINES
        head = f"*Tool calls* (newest {TOOL_LINES} of {len(progress.tools)})" if older > 0 else "*Tool calls*"
        blocks.append(section(head + "\n" + "\n".join(progress.tools[-TOOL_LINES:])))
    if view.run_id:
        labels = list(progress.answers.values())[:MAX_ANSWER_BUTTONS]
        for label in labels:  # one block each: an action_id is unique within its block
            value = f"{view.run_id}:{label}"
            blocks.append(actions(f"answer:{label}", button(f"Show full {label}", ids.ANSWER_FULL, value)))
    return f"Progress: {progress.summary()}", blocks


__all__ = ["Progress", "deferred", "progress_blocks", "tool_line"]
