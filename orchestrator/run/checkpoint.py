"""What a resumed run rebuilds from its checkpoints: each agent's conversation and its open calls.

A fold over the run's event log (`restore`), pure like the coordination fold. Per agent and phase
it gives back the conversation as it was sent to the model (`ModelCallCompleted` replies,
`TurnMessage` user messages and tool results), whether a coordination turn was in flight, which
calls of the last reply have no result yet, which of those had started executing (`ToolStarted`:
never run again) and which wait on an approval (`ToolAwaiting`), and the run's "for this run"
grants (`GrantAdded`, which the gate checks against their approval requests before using them).
The held-back result of a turn's workflow call is derived from the coordination events
themselves, so a crash between a workflow event and anything after it cannot lose or repeat it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from orchestrator.events import (
    AgentFailed,
    AgentRestarted,
    AnswerSubmitted,
    CheckpointCall,
    CheckpointPhase,
    GrantAdded,
    ModelCallCompleted,
    RunConcluded,
    RunEvent,
    RunFinished,
    RunParked,
    RunStarted,
    ToolAwaiting,
    ToolStarted,
    TurnMessage,
    VoteCast,
    VoteIgnored,
)
from orchestrator.llm.base import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from orchestrator.run import prompts

INTERRUPTED = (
    "interrupted by a restart: this call had started executing and its outcome is unknown. "
    "Check its effects before repeating it."
)


@dataclass(frozen=True, slots=True)
class Held:
    """The result of a turn's accepted workflow call, sent at the start of the agent's next turn."""

    call: ToolCall | None  # None for a structured agent (its reply had no tool call)
    text: str


@dataclass(slots=True)
class Conversation:
    """One agent's conversation in one phase, as the last process left it."""

    messages: list[Message] = field(default_factory=list)
    steps: int = 0  # model calls since the coordination turn (or the presentation) opened
    in_turn: bool = False  # coordination: a turn was opened and its workflow call not accepted
    held: Held | None = None

    def unanswered(self) -> tuple[ToolCall, ...]:
        """The calls of the last reply that have no result yet (in order)."""
        answered: set[str] = set()
        for message in reversed(self.messages):
            if isinstance(message, ToolResultMessage):
                answered.add(message.call_id)
            elif isinstance(message, AssistantMessage):
                return tuple(c for c in message.tool_calls if c.id not in answered)
            else:
                return ()
        return ()

    @property
    def replied(self) -> bool:
        """Whether the last message is a model reply (its calls may still lack results)."""
        return bool(self.messages) and isinstance(self.messages[-1], AssistantMessage)


@dataclass(slots=True)
class Restored:
    """Everything a resumed run takes from its log beyond the coordination state."""

    conversations: dict[tuple[str, CheckpointPhase], Conversation] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)  # call ids started and never completed
    awaiting: dict[str, str] = field(default_factory=dict)  # call id -> request id
    concluded: RunFinished | None = None  # the answer stood, the apply-back step had begun
    apply_awaiting: str | None = None  # the apply-back request the run parked on
    worked_seconds: float = 0.0  # working time of the segments that parked
    grants: list[GrantAdded] = field(default_factory=list)  # "for this run" approvals, unverified

    def conversation(self, agent_id: str, phase: CheckpointPhase) -> Conversation | None:
        """The agent's conversation in the phase, if it has one."""
        return self.conversations.get((agent_id, phase))


def restore(events: Iterable[RunEvent]) -> Restored:
    """Fold the run's log into what the agents resume from."""
    out = Restored()
    labels: dict[str, str] = {}
    for event in events:
        match event:
            case RunStarted():
                labels = {a.agent_id: a.label for a in event.agents}
            case TurnMessage():
                _message(out, event)
            case ModelCallCompleted():
                conv = out.conversations.setdefault((event.agent_id, event.phase), Conversation())
                calls = tuple(_call(c) for c in event.calls)
                conv.messages.append(AssistantMessage(text=event.text, tool_calls=calls))
                conv.steps += 1
            case ToolStarted():
                out.started.add(event.call_id)
                out.awaiting.pop(event.call_id, None)
            case ToolAwaiting():
                if event.phase == "apply":
                    out.apply_awaiting = event.request_id
                else:
                    out.awaiting[event.call_id] = event.request_id
            case AnswerSubmitted() | VoteCast() | VoteIgnored():
                _turn_ended(out, event, labels)
            case AgentRestarted():
                _restarted(out, event)
            case AgentFailed():
                out.conversations.pop((event.agent_id, "coordination"), None)
            case RunConcluded():
                out.concluded = event.result
            case RunParked():
                out.worked_seconds += event.worked_seconds
            case GrantAdded():
                out.grants.append(event)
            case _:
                pass
    return out


def _message(out: Restored, event: TurnMessage) -> None:
    key = (event.agent_id, event.phase)
    conv = out.conversations.get(key)
    if conv is None or event.fresh:
        conv = out.conversations[key] = Conversation()
    if event.opens_turn or event.fresh:
        conv.steps, conv.held = 0, None
        conv.in_turn = event.phase == "coordination"
    if event.role == "user":
        conv.messages.append(UserMessage(text=event.text))
        return
    conv.messages.append(
        ToolResultMessage(call_id=event.call_id, name=event.name, content=event.text, is_error=event.is_error)
    )
    out.started.discard(event.call_id)
    out.awaiting.pop(event.call_id, None)


def _turn_ended(
    out: Restored, event: AnswerSubmitted | VoteCast | VoteIgnored, labels: dict[str, str]
) -> None:
    conv = out.conversations.setdefault((event.agent_id, "coordination"), Conversation())
    workflow = next((c for c in conv.unanswered() if c.name in prompts.WORKFLOW_TOOLS), None)
    match event:
        case AnswerSubmitted():
            text = prompts.render("recorded_answer", label=event.label)
        case VoteCast():
            text = prompts.render("recorded_vote", target=labels.get(event.voted_for, event.voted_for))
        case VoteIgnored():
            text = prompts.render("vote_ignored", labels=event.reason.removeprefix("cast before seeing "))
    conv.held = Held(call=workflow, text=text)
    conv.in_turn = False


def _restarted(out: Restored, event: AgentRestarted) -> None:
    conv = out.conversations.get((event.agent_id, "coordination"))
    if conv is None or conv.held is None or event.reason != "vote ignored":
        return
    conv.held = Held(
        call=conv.held.call, text=prompts.render("vote_ignored", labels=", ".join(event.new_answers))
    )


def _call(call: CheckpointCall) -> ToolCall:
    return ToolCall(id=call.id, name=call.name, arguments=call.arguments, raw_arguments=call.raw_arguments)


def checkpoint_call(call: ToolCall) -> CheckpointCall:
    """A tool call as its checkpoint stores it."""
    return CheckpointCall(
        id=call.id, name=call.name, arguments=dict(call.arguments), raw_arguments=call.raw_arguments
    )
