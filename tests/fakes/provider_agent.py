"""The loopback server's default handler: a deterministic agent that follows the MassGen protocol.

Convention (adapt `answer_labels` / `vote_target` / `task_of` if the coordination prompts change):

1. `new_answer` offered and this model has not answered yet → call
   `new_answer(content="Answer from <model>: <task>")`. "Answered" means an earlier `new_answer`
   call in this conversation, or the text `Answer from <model>:` in the current input (for
   engines that rebuild the conversation on restart, as MassGen does).
2. Else `vote` offered → `vote(agent_id=<target>, reason=...)`. The target is the first anonymous
   id in the current input, written either as our prompts do, `<answer agent="agent2" ...>`
   (orchestrator/prompts/answer_block.md), or MassGen-style `<agent2.1>`; restricted to the vote
   tool's `agent_id` enum when it has one. Nothing parsable: the enum's first value, else "agent1".
3. Else (final presentation, no workflow tools) → text `Final answer: <model> presents: <task>`.

The current input is the text of every user message and tool result after the last assistant
message (where our engine puts the current answers). `<task>` is the text inside `<task>...</task>`
or `<ORIGINAL MESSAGE>...<END OF ORIGINAL MESSAGE>` in any user message, else the last user
message, collapsed to one line and cut to 80 characters.
"""

from __future__ import annotations

import re

from tests.fakes.provider_types import ProviderRequest, Reply

_LABEL = re.compile(r'<answer agent="(agent\d+)"|<(agent\d+)(?:\.\d+)?>')
_TASK = re.compile(r"<task>(.*?)</task>|<ORIGINAL MESSAGE>(.*?)<END OF ORIGINAL MESSAGE>", re.S)


def current_input(request: ProviderRequest) -> str:
    """User and tool texts after the last assistant message."""
    tail: list[str] = []
    for message in reversed(request.messages):
        if message.role == "assistant":
            break
        tail.append(message.text)
    return "\n".join(reversed(tail))


def task_of(request: ProviderRequest) -> str:
    """The user's task as one short line."""
    for message in request.messages:
        match = _TASK.search(message.text) if message.role == "user" else None
        if match:
            return _one_line(match.group(1) or match.group(2))
    return _one_line(request.last_user_text())


def _one_line(text: str) -> str:
    return " ".join(text.split())[:80] or "(empty task)"


def answer_text(model: str, task: str) -> str:
    """The deterministic answer a model gives; its prefix marks the model as having answered."""
    return f"Answer from {model}: {task}"


def answer_labels(text: str) -> list[str]:
    """Anonymous agent ids in order of first appearance, e.g. ['agent2', 'agent1']."""
    seen: list[str] = []
    for ours, massgen in _LABEL.findall(text):
        label = ours or massgen
        if label not in seen:
            seen.append(label)
    return seen


def vote_target(request: ProviderRequest) -> str:
    """The agent id to vote for (see module docstring, rule 2)."""
    schema = request.tool_schema("vote") or {}
    enum = ((schema.get("properties") or {}).get("agent_id") or {}).get("enum") or []
    labels = answer_labels(current_input(request))
    allowed = [label for label in labels if label in enum] if enum else labels
    if allowed:
        return str(allowed[0])
    return str(enum[0]) if enum else "agent1"


def has_answered(request: ProviderRequest) -> bool:
    """Whether this model already submitted an answer (rule 1)."""
    for message in request.messages:
        if message.role == "assistant" and any(name == "new_answer" for name, _ in message.tool_calls):
            return True
    return f"Answer from {request.model}:" in current_input(request)


def protocol_agent(request: ProviderRequest) -> Reply:
    """Answer once, then vote, then present: enough to drive a whole coordination run."""
    task = task_of(request)
    if "new_answer" in request.tools and not has_answered(request):
        return Reply(tool_calls=[("new_answer", {"content": answer_text(request.model, task)})])
    if "vote" in request.tools:
        target = vote_target(request)
        return Reply(tool_calls=[("vote", {"agent_id": target, "reason": f"{target} answers the task."})])
    return Reply(text=f"Final answer: {request.model} presents: {task}")
