"""Blocks for a run: the root status message, the final answer and the full-answer modal.

Every builder returns `(text, blocks)`: `text` is the notification and screen-reader fallback,
short and escaped; `blocks` is what the message shows. All untrusted text (task, answers,
reasons, tool actions) goes through `safe`/`code`/`markdown_to_mrkdwn`, which redact secrets and
escape Slack's control characters.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping

from bot.approval_ui.blocks import APPROVALS_HELP
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
    PullRequest,
    RunFinished,
    RunView,
)

Rendered = tuple[str, list[Block]]
# A link is shown only for a plain http(s) URL: no spaces, and none of mrkdwn's `<`, `>`, `|`.
_LINKABLE = re.compile(r"https?://[^\s<>|]{1,2000}")
ANSWER_GONE = "That answer is no longer available."  # Show full, after the run's store forgot it
# Above this many characters an answer is rendered in a worker thread: a large answer's render
# (parse, redaction, escaping) grows with it, about 15 ms per 64 KB of prose, and would otherwise
# hold every run on the event loop for as long.
OFF_LOOP_CHARS = 8 * 1024
MESSAGE_TEXT_BUDGET = 10_000  # visible block text per message; Slack rejects ~12-13k (bolt-js #2509)

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
_OUTCOME = {"finished": "Finished", "failed": "Failed", "cancelled": "Cancelled"}
# An agent still in one of these when the run is over was stopped with it.
_WORKING = {"waiting", "thinking", "tool", "awaiting_approval", "presenting"}
_SALVAGE_WHY = {"finish_now": "finished early", "timeout": "timed out"}
_SALVAGE_SOURCE = {
    "most_voted": "the most-voted answer",
    "latest_answer": "the latest answer",
    "consensus": "the agreed answer",
}


def salvage_phrase(salvage: str) -> str:
    """`RunFinished.salvage` (`finish_now:latest_answer`) in words: finished early, with the latest answer."""
    why, _, source = salvage.partition(":")
    words = _SALVAGE_WHY.get(why, why.replace("_", " "))
    if source:
        words += f", with {_SALVAGE_SOURCE.get(source, source.replace('_', ' '))}"
    return words


def _by(user: str | None) -> str:
    """` by <@U…>` after "finished early", when someone clicked Finish now."""
    return f" by {user_mention(user)}" if user else ""


def _agent_field(card: AgentCard, *, over: bool = False) -> str:
    model = f" {code(card.model, 60)}" if card.model else ""
    status = "stopped" if over and card.status in _WORKING else card.status
    icon = "⏹️" if status == "stopped" else _STATUS_ICON.get(status, "•")
    parts = [f"{icon} {safe(status.replace('_', ' '), 40)}"]
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
        salvage = (
            f" ({safe(salvage_phrase(view.salvage), 120)}{_by(view.stopped_by)})" if view.salvage else ""
        )
        return f"{icon} *Finished*{who}{salvage}. The answer is in the thread."
    if view.outcome == "cancelled":
        by = f" by {user_mention(view.cancelled_by)}" if view.cancelled_by else ""
        return f"{icon} *Cancelled*{by}."
    reasons = "; ".join(f"{safe(view.label(k), 40)}: {safe(str(v), 200)}" for k, v in view.failure.items())
    return f"{icon} *Failed*" + (f": {reasons}" if reasons else ".")


def status_blocks(view: RunView, *, now: float, used: str = "") -> Rendered:
    """The root status message: task, requester, agent cards, progress, and controls while running.

    `used` (already mrkdwn) says which repository, team and policy the run used and which of them
    were the channel's defaults.
    """
    phase = _OUTCOME.get(view.outcome or "") or _PHASE.get(view.phase, safe(view.phase, 40))
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
    if used:
        blocks.append(context(used))
    for start in range(0, min(len(view.agents), 30), 10):
        cards = [_agent_field(a, over=view.outcome is not None) for a in view.agents[start : start + 10]]
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
        if view.pull_request is not None:
            blocks.append(section(pull_request_line(view.pull_request)))
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
        facts.append(safe(salvage_phrase(event.salvage), 120) + _by(event.stopped_by))
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


def pull_request_line(pull_request: PullRequest) -> str:
    """mrkdwn: the pull request a run's approved publish opened (or added a commit to), linked."""
    title = safe(" ".join(pull_request.title.split()), 150)
    url = pull_request.url or ""
    link = f"<{url}|{title}>" if _LINKABLE.fullmatch(url) else title
    number = f" #{pull_request.number}" if pull_request.number is not None else ""
    if pull_request.url is None:
        what = f"Branch {code(pull_request.branch, 120)} pushed"
    elif pull_request.created:
        what = f"🔀 Pull request{number} opened: {link}"
    else:
        what = f"🔀 Pull request{number} updated with a new commit: {link}"
    return f"{what} · {safe(pull_request.stat, 120)} · {code(pull_request.branch, 120)}"


def apply_line(event: RunFinished) -> str:
    """Whether the winner's patch reached the source (`workspace.apply: ask`; shown when attempted)."""
    if event.applied:
        return "Patch applied to the source"
    return f"Patch not applied: {event.apply_reason or 'no reason given'}"


def rebuilt_line(view: RunView, agent_id: str, reason: str) -> str:
    """The notice that a taken-over run lost an agent's files (its workspace was rebuilt from the source)."""
    return (
        f"⚠️ {view.label(agent_id)}'s workspace could not be restored after the run moved to another worker "
        f"and was rebuilt from the source, so files it made before are not in this answer: {reason}"
    )


def final_answer_messages(event: RunFinished, view: RunView) -> list[Rendered]:
    """The winning answer as one or more thread posts (Markdown → mrkdwn, split when long)."""
    redacted = redact(event.answer)  # once: per message it made the answer's cost quadratic
    body = markdown_to_mrkdwn(redacted) or "_(the run produced an empty answer)_"
    first = " ".join(redacted[:1000].split())  # the notification's preview: 200 characters shown
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
        if i == len(groups) - 1 and event.pull_request is not None:
            blocks.append(section(pull_request_line(event.pull_request)))
        elif i == len(groups) - 1 and event.applied is not None:
            blocks.append(context(safe(apply_line(event), 500)))
        if i == len(groups) - 1:
            blocks += [context(safe(rebuilt_line(view, a, why), 500)) for a, why in view.rebuilt[:5]]
        part = f" (part {i + 1}/{len(groups)})" if len(groups) > 1 else ""
        text = f"Final answer{part}: {safe(first, 200)}" if i == 0 else f"Final answer{part}"
        if i == 0 and view.requester:  # the person who asked is notified that the answer is here
            text += f" · for {user_mention(view.requester)}"
            blocks.insert(2, context(f"Requested by {user_mention(view.requester)}"))
        messages.append((text, blocks))
    return messages


async def render_final_answer(event: RunFinished, view: RunView) -> list[Rendered]:
    """`final_answer_messages`, in a worker thread when the answer is large (the loop keeps serving)."""
    if len(event.answer) < OFF_LOOP_CHARS:
        return final_answer_messages(event, view)
    return await asyncio.to_thread(final_answer_messages, event, view)


async def render_answer_modal(label: str, content: str) -> Block:
    """`answer_modal`, in a worker thread when the answer is large (the loop keeps serving)."""
    if len(content) < OFF_LOOP_CHARS:
        return answer_modal(label, content)
    return await asyncio.to_thread(answer_modal, label, content)


def answer_modal(label: str, content: str) -> Block:
    """`views.open` payload (callback_id `ids.ANSWER_MODAL`) with a full answer, Markdown → mrkdwn."""
    chunks = split_message(markdown_to_mrkdwn(redact(content)) or "_(empty)_", 3000)
    blocks = [section(c) for c in chunks[:95]]
    if len(chunks) > 95:
        blocks.append(context("Truncated: the answer is longer than a modal can show."))
    title = plain(f"Answer {label}", 24)
    return modal(ids.ANSWER_MODAL, title, blocks)


def help_text() -> str:
    """The reply to `/massgen help` (mrkdwn)."""
    return "\n".join(
        [
            "*MassGen* runs a team of AI agents on your task; they answer, read each other's answers, vote, "
            "and the winning answer is posted in the thread.",
            "• `/massgen <task>`: start a run in this channel",
            "• `/massgen --team NAME --agents a,b --policy NAME <task>`: pick team, agents, approval policy",
            "• `/massgen status [run id]`: how a run is doing",
            "• `/massgen cancel <run id>`: stop a run",
            "• `/massgen approvals`: approvals waiting for you",
            "• `/massgen history`: recent runs in this channel",
            APPROVALS_HELP,
        ]
    )
