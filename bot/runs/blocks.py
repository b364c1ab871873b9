"""Blocks for a run: the root status message and the posts in its thread.

Every builder returns `(text, blocks)`: `text` is the notification and screen-reader fallback,
short and escaped; `blocks` is what the message shows. All untrusted text (task, answers,
reasons, tool actions) goes through `safe`/`code`/`markdown_to_mrkdwn`, which redact secrets and
escape Slack's control characters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.render import ids
from bot.render.escape import code, plain, safe, user_mention
from bot.render.kit import (
    Block,
    actions,
    button,
    confirm,
    context,
    cost,
    duration,
    header,
    section,
    tokens,
)
from bot.render.mrkdwn import markdown_to_mrkdwn, split_message
from bot.render.redact import redact
from bot.render.views import modal
from orchestrator import (
    AgentCard,
    AgentFailed,
    AgentRestarted,
    AnswerSubmitted,
    RunFinished,
    RunView,
    ToolDecided,
    VoteCast,
    VoteIgnored,
)

Rendered = tuple[str, list[Block]]
MESSAGE_TEXT_BUDGET = 10_000  # visible block text per message; Slack rejects ~12-13k (bolt-js #2509)
MAX_TOOL_LINES = 10

_STATUS_ICON = {
    "waiting": "⏳",
    "thinking": "💭",
    "tool": "🛠️",
    "awaiting_approval": "✋",
    "answered": "📝",
    "voted": "🗳️",
    "presenting": "🎤",
    "failed": "❌",
    "done": "✅",
}
_PHASE = {"starting": "Starting", "coordinating": "Coordinating", "presenting": "Presenting", "done": "Done"}
_OUTCOME_ICON = {"finished": "✅", "failed": "❌", "cancelled": "🚫"}
_DECISION_ICON = {"allow": "✅", "ask": "✋", "deny": "⛔"}


def _agent_field(card: AgentCard) -> str:
    model = f" {code(card.model, 60)}" if card.model else ""
    parts = [f"{_STATUS_ICON.get(card.status, '•')} {safe(card.status.replace('_', ' '), 40)}"]
    if card.answers:
        parts.append(f"{card.answers} answer{'s' if card.answers != 1 else ''}")
    if card.voted_for:
        parts.append(f"votes {safe(card.voted_for, 40)}")
    if card.output_tokens or card.input_tokens:
        parts.append(f"{tokens(card.input_tokens + card.output_tokens)} tok")
    return f"*{safe(card.label, 40)}*{model}\n" + " · ".join(parts)


def _outcome(view: RunView) -> str:
    icon = _OUTCOME_ICON.get(view.outcome or "", "")
    if view.outcome == "finished":
        who = f" — winner *{safe(view.label(view.winner), 40)}*" if view.winner else ""
        salvage = f" (salvaged: {safe(view.salvage, 80)})" if view.salvage else ""
        return f"{icon} *Finished*{who}{salvage}. The answer is in the thread."
    if view.outcome == "cancelled":
        by = f" by {user_mention(view.cancelled_by)}" if view.cancelled_by else ""
        return f"{icon} *Cancelled*{by}."
    reasons = "; ".join(f"{safe(view.label(k), 40)}: {safe(str(v), 200)}" for k, v in view.failure.items())
    return f"{icon} *Failed*" + (f": {reasons}" if reasons else ".")


def status_blocks(view: RunView, *, now: float) -> Rendered:
    """The root status message: task, requester, agent cards, progress, and controls while running."""
    phase = _PHASE.get(view.phase, safe(view.phase, 40))
    task = safe(" ".join(view.task.split()), 500)
    blocks: list[Block] = [section(f"*MassGen* · {phase}\n*Task:* {task}")]
    facts = [f"⏱ {duration(view.elapsed(now))}"]
    if view.input_tokens or view.output_tokens:
        facts.append(f"{tokens(view.input_tokens + view.output_tokens)} tokens · {cost(view.cost_usd)}")
    if view.requester:
        facts.append(f"requested by {user_mention(view.requester)}")
    if view.run_id:
        facts.append(f"run {code(view.run_id, 64)}")
    blocks.append(context(" · ".join(facts)))
    for start in range(0, min(len(view.agents), 30), 10):
        cards = [_agent_field(a) for a in view.agents[start : start + 10]]
        blocks.append(section("*Agents*" if start == 0 else "", fields=cards))
    if not view.agents and view.running:
        blocks.append(context("Starting agents…"))
    if view.pending:
        waiting = ", ".join(
            f"{safe(view.label(p.agent_id), 40)} {code(p.action, 80)}" for p in view.pending[:3]
        )
        more = f" and {len(view.pending) - 3} more" if len(view.pending) > 3 else ""
        blocks.append(context(f"✋ {len(view.pending)} waiting for approval: {waiting}{more}"))
    if view.outcome is not None:
        blocks.append(section(_outcome(view)))
    elif view.run_id:
        stop = confirm(
            "Cancel this run?",
            "The agents stop now and no answer is posted.",
            "Cancel run",
            "Keep going",
            danger=True,
        )
        blocks.append(
            actions(
                f"run_controls:{view.run_id}",
                button("Finish now", ids.RUN_FINISH_NOW, view.run_id),
                button("Cancel", ids.RUN_CANCEL, view.run_id, style="danger", confirm_dialog=stop),
            )
        )
    state = f"{_OUTCOME_ICON.get(view.outcome or '', '')} {(view.outcome or phase).capitalize()}".strip()
    return f"MassGen {state}: {safe(' '.join(view.task.split()), 150)}", blocks


def _preview(markdown: str, limit: int) -> tuple[str, bool]:
    """The first `limit` characters of Markdown, cut at a line and with any code fence closed."""
    if len(markdown) <= limit:
        return markdown, False
    cut = markdown[:limit]
    if (newline := cut.rfind("\n")) > limit // 2:
        cut = cut[:newline]
    fences = sum(1 for line in cut.split("\n") if line.strip().startswith(("```", "~~~")))
    return cut + ("\n```" if fences % 2 else "") + "\n…", True


def answer_blocks(event: AnswerSubmitted, *, run_id: str, preview_chars: int = 600) -> Rendered:
    """A thread post for a new answer: a preview, and "Show full" when it was cut."""
    label = safe(event.label, 40)
    preview, cut = _preview(redact(event.content), preview_chars)
    blocks = [
        section(f"📝 *{label}* submitted an answer"),
        section(markdown_to_mrkdwn(preview) or "_(empty)_"),
    ]
    if cut and run_id:
        value = f"{run_id}:{event.label}"
        blocks.append(actions(f"answer:{event.label}"[:255], button("Show full", ids.ANSWER_FULL, value)))
    return f"{label} submitted an answer", blocks


def vote_blocks(event: VoteCast, view: RunView) -> Rendered:
    who, whom = safe(view.label(event.agent_id), 40), safe(event.voted_for_label, 40)
    reason = safe(" ".join(event.reason.split()), 600)
    return f"{who} votes for {whom}", [
        context(f"🗳️ *{who}* votes for *{whom}*" + (f": {reason}" if reason else ""))
    ]


def vote_ignored_blocks(event: VoteIgnored, view: RunView) -> Rendered:
    who, whom = safe(view.label(event.agent_id), 40), safe(view.label(event.voted_for), 40)
    reason = safe(" ".join(event.reason.split()), 600)
    return f"Vote by {who} ignored", [context(f"⚠️ Vote by *{who}* for *{whom}* ignored: {reason}")]


def restart_blocks(event: AgentRestarted, view: RunView) -> Rendered:
    who = safe(view.label(event.agent_id), 40)
    seen = f" (new: {', '.join(safe(a, 40) for a in event.new_answers[:10])})" if event.new_answers else ""
    return f"{who} restarts", [context(f"↻ *{who}* restarts: {safe(event.reason, 600)}{seen}")]


def agent_failed_blocks(event: AgentFailed, view: RunView) -> Rendered:
    who = safe(view.label(event.agent_id), 40)
    return f"{who} failed", [section(f"❌ *{who}* failed: {safe(event.reason, 1500)}")]


def tool_batch_blocks(events: Sequence[ToolDecided], view: RunView) -> Rendered:
    """A compact list of tool decisions (what ran, what was denied), up to 10 per message."""
    lines = []
    for e in events[:MAX_TOOL_LINES]:
        icon = _DECISION_ICON.get(e.decision, "•")
        ran = "" if e.executed else ", not run"
        who = safe(view.label(e.agent_id), 40)
        lines.append(
            f"{icon} *{who}* {code(e.action, 180)} → {safe(e.decision, 10)} ({safe(e.risk, 10)}{ran})"
        )
    more = len(events) - MAX_TOOL_LINES
    blocks = [section("\n".join(lines) or "_no tool calls_")]
    if more > 0:
        blocks.append(context(f"and {more} more"))
    return f"{len(events)} tool call{'s' if len(events) != 1 else ''}", blocks


def _tally(tally: Mapping[str, int], view: RunView) -> str:
    ranked = sorted(tally.items(), key=lambda kv: -kv[1])
    return " · ".join(f"{safe(view.label(agent), 40)} {votes}" for agent, votes in ranked[:10])


def _final_facts(event: RunFinished, view: RunView) -> str:
    facts = []
    if event.winner:
        facts.append(f"winner *{safe(view.label(event.winner), 40)}*")
    if tally := (event.tally or dict(view.tally)):
        facts.append(f"votes: {_tally(tally, view)}")
    spent_tokens = event.input_tokens + event.output_tokens or view.input_tokens + view.output_tokens
    facts.append(f"{tokens(spent_tokens)} tokens · {cost(event.cost_usd or view.cost_usd)}")
    if event.salvage:
        facts.append(f"salvaged: {safe(event.salvage, 80)}")
    return " · ".join(facts)


def _group(chunks: list[str], first_budget: int) -> list[list[str]]:
    """Chunks (≤3000 chars each) grouped into messages under the per-message text budget."""
    groups: list[list[str]] = [[]]
    used, budget = 0, first_budget
    for chunk in chunks:
        if groups[-1] and (used + len(chunk) > budget or len(groups[-1]) >= 40):
            groups.append([])
            used, budget = 0, MESSAGE_TEXT_BUDGET
        groups[-1].append(chunk)
        used += len(chunk)
    return groups


def apply_line(event: RunFinished) -> str:
    """Whether the winner's patch reached the source (`workspace.apply: ask`; shown when attempted)."""
    if event.applied:
        return "Patch applied to the source"
    return f"Patch not applied: {event.apply_reason or 'no reason given'}"


def final_answer_messages(event: RunFinished, view: RunView) -> list[Rendered]:
    """The winning answer as one or more thread posts (Markdown → mrkdwn, split when long)."""
    body = markdown_to_mrkdwn(redact(event.answer)) or "_(the run produced an empty answer)_"
    facts = _final_facts(event, view)
    groups = _group(split_message(body, 3000), MESSAGE_TEXT_BUDGET - len(facts) - 200)
    messages: list[Rendered] = []
    for i, group in enumerate(groups):
        blocks: list[Block] = []
        if i == 0:
            blocks += [header("Final answer"), context(facts)]
        blocks += [section(chunk) for chunk in group]
        if i == len(groups) - 1 and event.patch:
            changed = sum(
                1
                for line in event.patch.splitlines()
                if line[:1] in "+-" and not line.startswith(("+++", "---"))
            )
            blocks.append(context(f"The winner's workspace has a patch ({changed} changed lines)."))
        if i == len(groups) - 1 and event.applied is not None:
            blocks.append(context(safe(apply_line(event), 500)))
        part = f" (part {i + 1}/{len(groups)})" if len(groups) > 1 else ""
        first = " ".join(redact(event.answer).split())
        text = f"Final answer{part}: {safe(first, 200)}" if i == 0 else f"Final answer{part}"
        messages.append((text, blocks))
    return messages


def answer_modal(label: str, content: str) -> Block:
    """`views.open` payload (callback_id `ids.ANSWER_MODAL`) with a full answer, Markdown → mrkdwn."""
    chunks = split_message(markdown_to_mrkdwn(redact(content)) or "_(empty)_", 3000)
    blocks = [section(c) for c in chunks[:95]]
    if len(chunks) > 95:
        blocks.append(context("Truncated: the answer is longer than a modal can show."))
    title = plain(f"Answer {label}", 24)
    return modal(ids.ANSWER_MODAL, title, blocks)
