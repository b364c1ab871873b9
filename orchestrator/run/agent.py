"""One agent's conversation: its coordination turns (model calls, tool calls, workflow calls).

A turn ends when the agent calls `new_answer` or `vote`. The result of that workflow call is held
back and sent at the start of the agent's next turn together with the current answers, so the agent
keeps its context and peers' answers arrive "in its next tool result". Answers that arrive while the
agent runs other tools are appended to those tool results (agents on their first answer excepted:
they are never interrupted).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.config.team import AgentConfig
from orchestrator.events import (
    AgentRestarted,
    AgentStatus,
    AnswerSubmitted,
    FinalDelta,
    RunEvent,
    TextDelta,
    VoteCast,
    VoteIgnored,
)
from orchestrator.llm import base
from orchestrator.llm.base import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from orchestrator.ports import AgentToolbox, Host, ModelClient, ToolOutcome, ToolPhase
from orchestrator.run import prompts
from orchestrator.run.coordination import CoordinationState

TEXT_INTERVAL_S = 0.1  # at most ~10 text events per second per agent


class AgentDropped(Exception):
    """The agent broke the protocol too often; `str(exc)` is the visible reason."""


class BudgetReached(Exception):
    """The run's spend cap is reached: no further model call may start."""


@dataclass(slots=True)
class _Pending:
    call: ToolCall
    text: str


class Coalescer:
    """Buffers streamed text and emits it at most every `TEXT_INTERVAL_S` (plus a final flush)."""

    def __init__(self, flush: Callable[[str], None]) -> None:
        self._flush = flush
        self._buffer: list[str] = []
        self._loop = asyncio.get_running_loop()
        self._last = -math.inf

    def add(self, text: str) -> None:
        self._buffer.append(text)
        if self._loop.time() - self._last >= TEXT_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
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

    @property
    def agent_id(self) -> str:
        return self.agent.id

    async def coordination_turn(self) -> None:
        """Run model calls until the agent makes one valid workflow call."""
        state = self.host.state
        self._open_turn(state)
        self.host.emit(AgentStatus(agent_id=self.agent_id, status="thinking", seen=self._visible(state)))
        limits = self.host.team.orchestrator
        for _ in range(limits.max_steps_per_turn):
            state = self.host.state
            may_answer = state.may_answer(self.agent_id, limits.max_new_answers_per_agent)
            label = state.agents[self.agent_id].label
            system = prompts.system_prompt(label, self.agent.system_message, vote_only=not may_answer)
            tools = [*prompts.workflow_specs(state, may_answer=may_answer), *self._tool_specs("coordination")]
            text, calls = await self.call_model(system, self.messages, tools, final=False)
            self.messages.append(AssistantMessage(text=text, tool_calls=tuple(calls)))
            if await self._handle(calls):
                self._reminders = 0
                return
        raise AgentDropped(f"no valid workflow call in {limits.max_steps_per_turn} model calls")

    def _open_turn(self, state: CoordinationState) -> None:
        if not self.messages:
            text = prompts.first_message(state.task, self._context)
            if state.latest:  # started late (e.g. after a crash): show what exists
                text += "\n" + prompts.update_message(state, self.agent_id)
            self.messages.append(base.UserMessage(text=text))
            return
        if self._pending is not None:
            pending, self._pending = self._pending, None
            content = pending.text + "\n\n" + prompts.update_message(state, self.agent_id)
            self.messages.append(
                ToolResultMessage(call_id=pending.call.id, name=pending.call.name, content=content)
            )

    def _visible(self, state: CoordinationState) -> tuple[str, ...]:
        return tuple(answer.label for answer in state.latest.values())

    async def _handle(self, calls: Sequence[ToolCall]) -> bool:
        """Run the calls of one assistant message; True when a workflow call ended the turn."""
        workflow = [c for c in calls if c.name in prompts.WORKFLOW_TOOLS]
        for call in calls:
            if call.name not in prompts.WORKFLOW_TOOLS:
                outcome = await self.run_tool(call, "coordination")
                self.messages.append(self._result(call, self._inject(outcome.content), outcome.is_error))
        if len(workflow) == 1:
            error = self._workflow(workflow[0])
            if error is None:
                return True
            self.messages.append(self._result(workflow[0], error, True))
            self._strike(f"invalid {workflow[0].name} call")
        elif workflow:
            for call in workflow:
                self.messages.append(self._result(call, "Call exactly one workflow tool per turn.", True))
            self._strike("several workflow calls at once")
        elif not calls:  # plain text: the agent forgot to finish its turn
            self._strike("no workflow call")
            self.messages.append(base.UserMessage(text=prompts.render("reminder")))
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

    def _tool_specs(self, phase: ToolPhase) -> list[ToolSpec]:
        return list(self.toolbox.specs(phase)) if self.toolbox is not None else []

    async def run_tool(self, call: ToolCall, phase: ToolPhase) -> ToolOutcome:
        """One non-workflow tool call through the toolbox (which owns permissions and its events)."""
        if self.toolbox is None or call.name not in {spec.name for spec in self.toolbox.specs(phase)}:
            return ToolOutcome(content=f"Unknown tool {call.name!r}.", is_error=True)
        self.host.emit(AgentStatus(agent_id=self.agent_id, status="tool", detail=call.name))
        try:
            return await self.toolbox.call(call, phase=phase)
        finally:
            self.host.emit(AgentStatus(agent_id=self.agent_id, status="thinking"))

    async def call_model(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec], *, final: bool
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
        try:
            async for item in self.client.stream_turn(system=system, messages=list(messages), tools=tools):
                if isinstance(item, base.TextDelta):
                    parts.append(item.text)
                    coalescer.add(item.text)
                elif isinstance(item, base.ToolCallReady):
                    calls.append(item.call)
                else:
                    usage = item.usage
        finally:
            coalescer.flush()
            # Recorded once the stream is closed, so that the turn's workflow call (handled without
            # awaiting) lands before the supervisor can react to a spend cap this usage crosses.
            if usage is not None:
                self.host.record_usage(self.agent_id, usage)
        return "".join(parts), calls


def _ignore(_: object) -> None:
    return None
