"""The loopback server's default handler: a deterministic agent that follows the MassGen protocol.

Convention (adapt `answer_labels` / `vote_target` if the coordination prompts change):

1. `new_answer` offered and this model has not answered yet → call
   `new_answer(content="Answer from <model>: <task>")`. "Answered" means either an earlier
   `new_answer` call in this conversation or the text `Answer from <model>:` already present in
   the last user message (the CURRENT ANSWERS block after a restart rebuilds the conversation).
2. Else `vote` offered → `vote(agent_id=<target>, reason=...)`, where the target is the first
   anonymous id found in the last user message as a label `<agentN>` or `<agentN.M>`
   (MassGen's `<agent2.1> ... <end of agent2.1>` blocks), restricted to the `agent_id` enum of
   the vote tool's schema when it has one; with no parsable id: the enum's first value, else
   "agent1".
3. Else (final presentation, no workflow tools) → text `Final answer: <model> presents: <task>`.

`<task>` is the text between `<ORIGINAL MESSAGE>` and `<END OF ORIGINAL MESSAGE>` when present,
else the last user message, collapsed to one line and cut to 80 characters.
"""

from __future__ import annotations

import re

from tests.fakes.provider_types import ProviderRequest, Reply

_LABEL = re.compile(r"<(agent\d+)(?:\.\d+)?>")
_ORIGINAL = re.compile(r"<ORIGINAL MESSAGE>(.*?)<END OF ORIGINAL MESSAGE>", re.S)


def task_of(request: ProviderRequest) -> str:
    """The user's task as one short line."""
    text = request.last_user_text()
    match = _ORIGINAL.search(text)
    task = " ".join((match.group(1) if match else text).split())
    return task[:80] or "(empty task)"


def answer_text(model: str, task: str) -> str:
    """The deterministic answer a model gives; its prefix marks the model as having answered."""
    return f"Answer from {model}: {task}"


def answer_labels(text: str) -> list[str]:
    """Anonymous agent ids in order of first appearance, e.g. ['agent2', 'agent1']."""
    seen: list[str] = []
    for label in _LABEL.findall(text):
        if label not in seen:
            seen.append(label)
    return seen


def vote_target(request: ProviderRequest) -> str:
    """The agent id to vote for (see module docstring, rule 2)."""
    schema = request.tool_schema("vote") or {}
    enum = ((schema.get("properties") or {}).get("agent_id") or {}).get("enum") or []
    labels = answer_labels(request.last_user_text())
    allowed = [label for label in labels if label in enum] if enum else labels
    if allowed:
        return str(allowed[0])
    return str(enum[0]) if enum else "agent1"


def has_answered(request: ProviderRequest) -> bool:
    """Whether this model already submitted an answer (rule 1)."""
    for message in request.messages:
        if message.role == "assistant" and any(name == "new_answer" for name, _ in message.tool_calls):
            return True
    return f"Answer from {request.model}:" in request.last_user_text()


def protocol_agent(request: ProviderRequest) -> Reply:
    """Answer once, then vote, then present: enough to drive a whole coordination run."""
    task = task_of(request)
    if "new_answer" in request.tools and not has_answered(request):
        return Reply(tool_calls=[("new_answer", {"content": answer_text(request.model, task)})])
    if "vote" in request.tools:
        target = vote_target(request)
        return Reply(tool_calls=[("vote", {"agent_id": target, "reason": f"{target} answers the task."})])
    return Reply(text=f"Final answer: {request.model} presents: {task}")
