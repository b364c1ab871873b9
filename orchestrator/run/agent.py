"""One agent's conversation: its coordination turns (model calls, tool calls, workflow calls).

A turn ends when the agent calls `new_answer` or `vote`. The result of that workflow call is held
back and sent at the start of the agent's next turn together with the current answers, so the agent
keeps its context and peers' answers arrive "in its next tool result". Answers that arrive while the
agent runs other tools are appended to those tool results (agents on their first answer excepted:
they are never interrupted).

A model that cannot call tools (`backend.tool_calls: false`) makes the same workflow call as one
JSON object (`structured.py`), each turn in a fresh conversation; a refused reply is retried
`structured_retries` times, then the agent keeps its current answer (a vote for itself, with the
reason) or, with none, leaves the run.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.config.team import AgentConfig
from orchestrator.errors import ToolParked
from orchestrator.events import (
    AgentRestarted,
    AgentStatus,
    AnswerSubmitted,
    CheckpointPhase,
    FinalDelta,
    ModelCallCompleted,
    RunEvent,
    TextDelta,
    ToolAwaiting,
    TurnMessage,
    VoteCast,
    VoteIgnored,
)
from orchestrator.llm import base
from orchestrator.llm.base import (
    AssistantMessage,
    Message,
    OutputSchema,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from orchestrator.ports import AgentToolbox, Host, ModelClient, ToolOutcome, ToolPhase
from orchestrator.run import prompts, structured
from orchestrator.run.checkpoint import INTERRUPTED, Conversation, Restored, checkpoint_call
from orchestrator.run.coordination import CoordinationState

log = logging.getLogger(__name__)
TEXT_INTERVAL_S = 0.1  # at most ~10 text events per second per agent


class AgentDropped(Exception):
    """The agent broke the protocol too often; `str(exc)` is the visible reason."""


class BudgetReached(Exception):
    """The run's spend cap is reached: no further model call may start."""


@dataclass(slots=True)
class _Pending:
    call: ToolCall | None
    text: str


class Coalescer:
    """Buffers streamed text and emits it at most every `TEXT_INTERVAL_S` (plus a final flush)."""

    def __init__(self, flush: Callable[[str], None]) -> None:
        self._flush = flush
        self._buffer: list[str] = []
        self._loop = asyncio.get_running_loop()
        self._last = -math.inf

    def add(self, text: str) -> None:
        """Buffer streamed text; flush when the interval has passed."""
        self._buffer.append(text)
        if self._loop.time() - self._last >= TEXT_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        """Emit the buffered text as one event."""
        if self._buffer:
            self._flush("".join(self._buffer))
            self._buffer.clear()
            self._last = self._loop.time()


class AgentSession:
    """The conversation of one agent across its coordination turns."""

    def __init__(
        self,
        host: Host,
        agent: AgentConfig,
        client: ModelClient,
        toolbox: AgentToolbox | None,
        *,
        context: str | None = None,
    ) -> None:
        self.host = host
        self.agent = agent
        self.client = client
        self.toolbox = toolbox
        self.messages: list[Message] = []
        self._context = context
        self._pending: _Pending | None = None
        self._reminders = 0
        self.structured = agent.backend.structured
        self._resume: Conversation | None = None  # a coordination turn in flight when the run stopped
        self.final: Conversation | None = None  # the presentation as far as it got
        self._started: set[str] = set()  # calls that started executing and never completed
        self._awaiting: dict[str, str] = {}  # call id -> the approval request it is parked on

    def restore(self, restored: Restored) -> None:
        """Take the conversation back from the run's checkpoints (a resumed run)."""
        self._started, self._awaiting = restored.started, restored.awaiting
        self.final = restored.conversation(self.agent_id, "final")
        conv = restored.conversation(self.agent_id, "coordination")
        if conv is None:
            return
        self.messages = list(conv.messages)
        if conv.held is not None:
            self._pending = _Pending(conv.held.call, conv.held.text)
        self._resume = conv if conv.in_turn else None

    async def record(
        self,
        message: Message,
        phase: CheckpointPhase = "coordination",
        *,
        opens: bool = False,
        fresh: bool = False,
    ) -> None:
        """Checkpoint a user message or tool result (stored before the turn goes on)."""
        if isinstance(message, AssistantMessage):
            raise TypeError("model replies are checkpointed by call_model")
        if isinstance(message, ToolResultMessage):
            event = TurnMessage(
                agent_id=self.agent_id, phase=phase, role="tool", text=message.content,
                call_id=message.call_id, name=message.name, is_error=message.is_error,
                fresh=fresh, opens_turn=opens,
            )  # fmt: skip
        else:
            event = TurnMessage(
                agent_id=self.agent_id,
                phase=phase,
                role="user",
                text=message.text,
                fresh=fresh,
                opens_turn=opens,
            )
        await self.host.checkpoint(event)

    async def _add(self, message: Message, *, opens: bool = False, fresh: bool = False) -> None:
        self.messages.append(message)
        await self.record(message, opens=opens, fresh=fresh)

    @property
    def agent_id(self) -> str:
        """The agent's id in the team."""
        return self.agent.id

    async def coordination_turn(self) -> None:
        """Run model calls until the agent makes one valid workflow call (or go on with the one in flight)."""
        resumed, self._resume = self._resume, None
        steps = 0
        if resumed is None:
            state = self.host.state
            await self._open_turn(state)
            self.host.emit(AgentStatus(agent_id=self.agent_id, status="thinking", seen=self._visible(state)))
        else:
            steps = resumed.steps
            self.host.emit(AgentStatus(agent_id=self.agent_id, status="thinking"))
        if self.structured:
            await self._structured_turn(steps, resumed)
            return
        if resumed is not None and await self._resume_reply(resumed):
            return
        limits = self.host.team.orchestrator
        for _ in range(max(1, limits.max_steps_per_turn - steps)):
            state = self.host.state
            may_answer = state.may_answer(self.agent_id, limits.max_new_answers_per_agent)
            label = state.agents[self.agent_id].label
            system = prompts.system_prompt(label, self.agent.system_message, vote_only=not may_answer)
            tools = [*prompts.workflow_specs(state, may_answer=may_answer), *self.tool_specs("coordination")]
            text, calls = await self.call_model(system, self.messages, tools, final=False)
            self.messages.append(AssistantMessage(text=text, tool_calls=tuple(calls)))
            if await self._handle(calls):
                self._reminders = 0
                return
        raise AgentDropped(f"no valid workflow call in {limits.max_steps_per_turn} model calls")

    async def _resume_reply(self, resumed: Conversation) -> bool:
        """Finish the calls of the reply the turn stopped at; True when its workflow call ended the turn."""
        pending = resumed.unanswered()
        if not pending and not resumed.replied:
            return False  # every call has its result: the next model call is due
        if await self._handle(pending):
            self._reminders = 0
            return True
        return False

    async def _structured_turn(self, steps: int = 0, resumed: Conversation | None = None) -> None:
        """One turn as JSON replies: retried while refused, then salvaged (never a stall)."""
        limits = self.host.team.orchestrator
        error = ""
        if resumed is not None and resumed.replied:  # the reply was stored, its call not yet applied
            last = self.messages[-1]
            assert isinstance(last, AssistantMessage)
            error = await self._structured_reply(last.text)
            if not error:
                return
        for _ in range(max(1, limits.structured_retries + 1 - steps)):
            state = self.host.state
            may_answer = state.may_answer(self.agent_id, limits.max_new_answers_per_agent)
            label = state.agents[self.agent_id].label
            system = prompts.system_prompt(
                label, self.agent.system_message, vote_only=not may_answer, structured=True
            )
            schema = structured.reply_schema(
                state, may_answer=may_answer, max_tokens=self.agent.backend.max_tokens
            )
            text, _ = await self.call_model(system, self.messages, [], final=False, output=schema)
            self.messages.append(AssistantMessage(text=text))
            error = await self._structured_reply(text)
            if not error:
                return
        self._salvage(f"no valid reply in {limits.structured_retries + 1} tries (last: {error.rstrip('.')})")

    async def _structured_reply(self, text: str) -> str:
        """Apply one JSON reply; the error it was refused with ("" when accepted)."""
        call = structured.parse_reply(text)
        error = call if isinstance(call, str) else self._workflow(call) or ""
        if error:
            await self._add(base.UserMessage(text=prompts.render("structured_retry", error=error)))
        return error

    def _salvage(self, why: str) -> None:
        """After the last refused reply: keep the agent's own answer, or leave the run without one."""
        state = self.host.state
        log.warning("agent %s: %s", self.agent_id, why)
        if self.agent_id not in state.latest:
            raise AgentDropped(why)
        label = state.agents[self.agent_id].label
        error = self._workflow(structured.keep_own_answer(label, why))
        assert error is None  # a vote for an agent with an answer is always accepted

    async def _open_turn(self, state: CoordinationState) -> None:
        if self.structured:
            # A fresh conversation each turn (the task, what its last reply did, the current
            # answers, its own last): a small local model's context holds a turn, not a run.
            recorded, self._pending = (self._pending.text if self._pending else None), None
            text = prompts.structured_turn(state, self.agent_id, self._context, recorded)
            self.messages = []
            await self._add(base.UserMessage(text=text), opens=True, fresh=True)
            return
        if not self.messages:
            text = prompts.first_message(state.task, self._context)
            if state.latest:  # started late (e.g. after a crash): show what exists
                text += "\n" + prompts.update_message(state, self.agent_id)
            await self._add(base.UserMessage(text=text), opens=True)
            return
        if self._pending is not None:
            pending, self._pending = self._pending, None
            content = pending.text + "\n\n" + prompts.update_message(state, self.agent_id)
            if pending.call is None:
                await self._add(base.UserMessage(text=content), opens=True)
            else:
                result = ToolResultMessage(call_id=pending.call.id, name=pending.call.name, content=content)
                await self._add(result, opens=True)

    def _visible(self, state: CoordinationState) -> tuple[str, ...]:
        return tuple(answer.label for answer in state.latest.values())

    async def _handle(self, calls: Sequence[ToolCall]) -> bool:
        """Run the calls of one assistant message; True when a workflow call ended the turn."""
        workflow = [c for c in calls if c.name in prompts.WORKFLOW_TOOLS]
        for call in calls:
            if call.name not in prompts.WORKFLOW_TOOLS:
                outcome = await self.resume_tool(call, "coordination")
                await self._add(self._result(call, self._inject(outcome.content), outcome.is_error))
        if len(workflow) == 1:
            error = self._workflow(workflow[0])
            if error is None:
                return True
            await self._add(self._result(workflow[0], error, True))
            self._strike(f"invalid {workflow[0].name} call")
        elif workflow:
            for call in workflow:
                await self._add(self._result(call, "Call exactly one workflow tool per turn.", True))
            self._strike("several workflow calls at once")
        elif not calls:  # plain text: the agent forgot to finish its turn
            self._strike("no workflow call")
            await self._add(base.UserMessage(text=prompts.render("reminder")))
        return False

    def _strike(self, what: str) -> None:
        """Count a protocol miss (no or a bad workflow call); past `max_reminders` the agent is dropped."""
        if self._reminders >= self.host.team.orchestrator.max_reminders:
            tries = self._reminders + 1
            raise AgentDropped(
                f"ended {tries} turns without calling new_answer or vote correctly (last: {what})"
            )
        self._reminders += 1

    def _workflow(self, call: ToolCall) -> str | None:
        """Apply a workflow call; returns an error text for the model, or None when accepted."""
        state = self.host.state
        if call.name == prompts.NEW_ANSWER:
            content = str(call.arguments.get("content", "")).strip()
            if not content:
                return "new_answer needs a non-empty `content`."
            if not state.may_answer(self.agent_id, self.host.team.orchestrator.max_new_answers_per_agent):
                return "You have used all your answers; vote instead."
            label = state.next_label(self.agent_id)
            self.host.emit(AnswerSubmitted(agent_id=self.agent_id, label=label, content=content))
            self._pending = _Pending(call, prompts.render("recorded_answer", label=label))
            return None
        raw = str(call.arguments.get("agent_id", ""))
        target = state.resolve_vote_target(raw)
        if target is None:
            valid = ", ".join(sorted(state.agents[a].label for a in state.latest)) or "none yet"
            return f"Invalid agent_id {raw!r}. Valid: {valid}."
        reason = str(call.arguments.get("reason", ""))
        unseen = state.unseen(self.agent_id)
        if unseen:
            labels = ", ".join(unseen)
            why = f"cast before seeing {labels}"
            self.host.emit(VoteIgnored(agent_id=self.agent_id, voted_for=target, reason=why))
            # Its next turn starts at once, keeping its context and showing the new answers.
            restart = AgentRestarted(agent_id=self.agent_id, reason="vote ignored", new_answers=tuple(unseen))
            self.host.emit(restart)
            self._pending = _Pending(call, prompts.render("vote_ignored", labels=labels))
            return None
        label = state.latest[target].label
        self.host.emit(
            VoteCast(agent_id=self.agent_id, voted_for=target, voted_for_label=label, reason=reason)
        )
        self._pending = _Pending(call, prompts.render("recorded_vote", target=state.agents[target].label))
        return None

    def _inject(self, content: str) -> str:
        """Append peers' unseen answers to a tool result (never for an agent still on its first answer)."""
        state = self.host.state
        if state.agents[self.agent_id].answers == 0:
            return content
        unseen = state.unseen(self.agent_id)
        if not unseen:
            return content
        block = prompts.render("injected", answers=prompts.answers_block(state, self.agent_id))
        self.host.emit(
            AgentRestarted(
                agent_id=self.agent_id, reason="new answers added to a tool result", new_answers=tuple(unseen)
            )
        )
        return f"{content}\n\n{block}"

    @staticmethod
    def _result(call: ToolCall, content: str, is_error: bool) -> ToolResultMessage:
        return ToolResultMessage(call_id=call.id, name=call.name, content=content, is_error=is_error)

    def tool_specs(self, phase: ToolPhase) -> list[ToolSpec]:
        """The toolbox's tools in this phase; none for a model that cannot call tools."""
        if self.toolbox is None or self.structured:
            return []
        return list(self.toolbox.specs(phase))

    async def resume_tool(self, call: ToolCall, phase: ToolPhase) -> ToolOutcome:
        """A call of a reply: never re-run once started; a parked one goes on from its request."""
        if call.id in self._started:
            self._started.discard(call.id)
            return ToolOutcome(content=INTERRUPTED, is_error=True)
        return await self.run_tool(call, phase, awaiting=self._awaiting.pop(call.id, None))

    async def run_tool(self, call: ToolCall, phase: ToolPhase, *, awaiting: str | None = None) -> ToolOutcome:
        """One non-workflow tool call through the toolbox (which owns permissions and its events).

        In park mode an ask is checkpointed (`ToolAwaiting`) and `ToolParked` ends the agent's task.
        """
        if self.toolbox is None or call.name not in {spec.name for spec in self.toolbox.specs(phase)}:
            return ToolOutcome(content=f"Unknown tool {call.name!r}.", is_error=True)
        self.host.emit(AgentStatus(agent_id=self.agent_id, status="tool", detail=call.name))
        try:
            outcome = await self.toolbox.call(call, phase=phase, awaiting=awaiting)
        except ToolParked as parked:
            event = ToolAwaiting(
                agent_id=self.agent_id, call_id=call.id, request_id=parked.request_id, phase=phase
            )
            await self.host.checkpoint(event)
            raise
        finally:
            if self.host.state.agents[self.agent_id].status != "awaiting_approval":
                self.host.emit(AgentStatus(agent_id=self.agent_id, status="thinking"))
        return outcome

    async def call_model(
        self,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        final: bool,
        output: OutputSchema | None = None,
    ) -> tuple[str, list[ToolCall]]:
        """Stream one model call; text goes out as coalesced deltas, usage is recorded and priced."""
        if self.host.over_budget():
            raise BudgetReached
        event: Callable[[str], RunEvent] = (
            (lambda t: FinalDelta(agent_id=self.agent_id, text=t))
            if final
            else (lambda t: TextDelta(agent_id=self.agent_id, text=t))
        )
        coalescer = Coalescer(lambda t: _ignore(self.host.emit(event(t))))
        parts: list[str] = []
        calls: list[ToolCall] = []
        usage: base.Usage | None = None
        completed = False
        try:
            stream = self.client.stream_turn(
                system=system, messages=list(messages), tools=tools, output=output
            )
            async for item in stream:
                if isinstance(item, base.TextDelta):
                    parts.append(item.text)
                    coalescer.add(item.text)
                elif isinstance(item, base.ToolCallReady):
                    calls.append(item.call)
                else:
                    usage = item.usage
            completed = True
        finally:
            coalescer.flush()
            if completed:  # the checkpoint first: a restart never makes (nor bills) this call again
                self.host.emit(self._completed("".join(parts), calls, usage, final=final))
            # Recorded once the stream is closed, so that the turn's workflow call (handled without
            # awaiting) lands before the supervisor can react to a spend cap this usage crosses.
            if usage is not None:
                self.host.record_usage(self.agent_id, usage)
        # Not awaited here (the workflow call must land before the supervisor sees this spend):
        # every later step (a tool about to run, the next message) is checkpointed, and the store
        # keeps seq order, so this reply is stored before anything that follows it happens.
        return "".join(parts), calls

    def _completed(
        self, text: str, calls: Sequence[ToolCall], usage: base.Usage | None, *, final: bool
    ) -> ModelCallCompleted:
        return ModelCallCompleted(
            agent_id=self.agent_id,
            phase="final" if final else "coordination",
            text=text,
            calls=tuple(checkpoint_call(c) for c in calls),
            input_tokens=usage.input_tokens if usage is not None else 0,
            output_tokens=usage.output_tokens if usage is not None else 0,
        )


def _ignore(_: object) -> None:
    return None
