"""Fakes for tests and benchmarks: a scripted model client and small toolboxes.

`ScriptedModelClient` implements `orchestrator.ports.ModelClient` turn by turn: each call to
`stream_turn` takes the next `Turn` (or asks a `Script` function for one), after which `then`
(default `protocol`: answer once, then vote, then present) takes over. Usage is estimated at four
characters per token unless the turn gives it, so cost and budget behave as with a real provider.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.config.team import AgentConfig, BackendConfig, OrchestratorConfig, PriceConfig, TeamConfig
from orchestrator.errors import ProviderError
from orchestrator.events import ToolCalled, ToolDecided
from orchestrator.llm.base import (
    AssistantMessage,
    Message,
    OutputSchema,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolResultMessage,
    ToolSpec,
    TurnEnd,
    Usage,
    UserMessage,
)
from orchestrator.ports import RunContext, ToolOutcome, ToolPhase
from orchestrator.run import Parked, RunHandle, Terminal

_ids = itertools.count(1)
_ANSWER_AGENT = re.compile(r'<answer agent="(agent\d+)"')
_OWN_LABEL = re.compile(r"^You are (agent\d+)\b")


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One recorded `stream_turn` call."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    output: OutputSchema | None = None  # the JSON Schema asked for (structured output)

    @property
    def tool_names(self) -> set[str]:
        return {spec.name for spec in self.tools}

    def prompt_chars(self) -> int:
        """Characters the provider would read: system, messages and tool schemas."""
        size = len(self.system) + sum(len(json.dumps(s.parameters)) + len(s.description) for s in self.tools)
        for message in self.messages:
            if isinstance(message, UserMessage | ToolResultMessage):
                size += len(message.text if isinstance(message, UserMessage) else message.content)
            else:
                size += len(message.text) + sum(
                    len(json.dumps(dict(c.arguments))) for c in message.tool_calls
                )
        return size


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """What the model does in one call."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None  # None: estimated from the request
    error: BaseException | None = None  # raised after the text streamed
    delay: float = 0.0  # seconds before the first item
    gate: asyncio.Event | None = None  # wait for it before streaming (holds the turn open)


Script = Callable[[Request], Turn]


def call(name: str, **arguments: Any) -> ToolCall:
    """A tool call with a fresh id."""
    return ToolCall(
        id=f"call_{next(_ids)}", name=name, arguments=arguments, raw_arguments=json.dumps(arguments)
    )


def answer(content: str, text: str = "") -> Turn:
    return Turn(text=text, calls=(call("new_answer", content=content),))


def vote(agent_id: str, reason: str = "best") -> Turn:
    return Turn(calls=(call("vote", agent_id=agent_id, reason=reason),))


def say(text: str) -> Turn:
    return Turn(text=text)


def fail(message: str = "HTTP 500 after retries") -> Turn:
    return Turn(error=ProviderError("scripted", "scripted", 500, False, message))


def hang(gate: asyncio.Event | None = None) -> Turn:
    """A turn that waits until `gate` is set (forever by default)."""
    return Turn(gate=gate or asyncio.Event(), text="late")


def reply(action: str, **fields: str) -> Turn:
    """A structured-output reply: the JSON object a model without tool calls sends."""
    return say(json.dumps({"action": action, **fields}))


def structured_protocol(request: Request) -> Turn:
    """`protocol` for structured output: answer once, then vote for the first peer shown."""
    assert request.output is not None
    allowed = json.dumps(dict(request.output.schema))
    own = _OWN_LABEL.search(request.system)  # each turn shows the agent its own answer, if any
    answered = own is not None and any(
        f'<answer agent="{own.group(1)}"' in _text(m) for m in request.messages
    )
    if '"answer"' in allowed and not answered:
        return reply("answer", text=f"An answer to the task ({len(request.messages)} messages in).")
    for message in reversed(request.messages):
        found = _ANSWER_AGENT.search(_text(message))
        if found:
            return reply("vote", agent=found.group(1), reason="complete and correct")
    return reply("vote", agent="agent1", reason="nothing else shown")


def protocol(request: Request) -> Turn:
    """MassGen-style default: answer once, then vote for the first peer shown, else present."""
    if request.output is not None:
        return structured_protocol(request)
    names = request.tool_names
    answered = any(
        isinstance(m, AssistantMessage) and any(c.name == "new_answer" for c in m.tool_calls)
        for m in request.messages
    )
    own = _OWN_LABEL.search(request.system)
    if own is not None and any(f'<answer agent="{own.group(1)}"' in _text(m) for m in request.messages):
        answered = True  # a resumed conversation shows the agent its own earlier answer
    if "new_answer" in names and not answered:
        return answer(f"An answer to the task ({len(request.messages)} messages in).")
    if "vote" in names:
        for message in reversed(request.messages):
            found = _ANSWER_AGENT.search(_text(message))
            if found:
                return vote(found.group(1), "complete and correct")
    return say("Final answer: the task is done.")


def _text(message: Message) -> str:
    return message.content if isinstance(message, ToolResultMessage) else message.text


class ScriptedModelClient:
    """A `ModelClient` that plays `turns` in order, then `then` for every further call."""

    def __init__(self, *turns: Turn | Script, then: Script = protocol, model: str = "scripted") -> None:
        self._turns = list(turns)
        self._then = then
        self._model = model
        self.requests: list[Request] = []
        self.cancelled = 0  # calls interrupted by cancellation
        self.closed = False

    @property
    def model(self) -> str:
        return self._model

    async def close(self) -> None:
        """Nothing to release: no connections."""
        self.closed = True

    async def stream_turn(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        output: OutputSchema | None = None,
    ) -> AsyncIterator[StreamItem]:
        request = Request(system=system, messages=tuple(messages), tools=tuple(tools), output=output)
        index = len(self.requests)
        self.requests.append(request)
        step = self._turns[index] if index < len(self._turns) else self._then
        turn = step if isinstance(step, Turn) else step(request)
        try:
            async for item in self._play(turn, request):
                yield item
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def _play(self, turn: Turn, request: Request) -> AsyncIterator[StreamItem]:
        if turn.gate is not None:
            await turn.gate.wait()
        if turn.delay:
            await asyncio.sleep(turn.delay)
        for piece in _pieces(turn.text):
            yield TextDelta(text=piece)
        if turn.error is not None:
            raise turn.error
        for tool_call in turn.calls:
            yield ToolCallReady(call=tool_call)
        out_chars = len(turn.text) + sum(len(c.raw_arguments) for c in turn.calls)
        usage = turn.usage or Usage(
            input_tokens=math.ceil(request.prompt_chars() / 4), output_tokens=math.ceil(out_chars / 4)
        )
        yield TurnEnd(stop_reason="tool_use" if turn.calls else "end_turn", usage=usage)
        await asyncio.sleep(0)  # like an SDK closing its HTTP stream: the loop runs after the last item


def _pieces(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# ---- fake tools ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Execution:
    agent_id: str
    tool: str
    phase: ToolPhase
    arguments: dict[str, Any]


@dataclass(slots=True, kw_only=True)
class FakeToolsConfig:
    """Behaviour of `FakeRunTools`: which tools are denied, which are side effects.

    They never ask: a run that asks a human parks, which the real gate does (see `build_run_tools`
    with `approvals.testing`'s in-memory stores).
    """

    deny: frozenset[str] = frozenset()
    side_effects: frozenset[str] = frozenset({"publish"})
    patch: str | None = None


class FakeToolbox:
    """Two tools: `shell(command)` and `publish(message)`; behaviour from `FakeToolsConfig`."""

    def __init__(self, tools: FakeRunTools, agent_id: str) -> None:
        self._tools = tools
        self._agent_id = agent_id

    def specs(self, phase: ToolPhase) -> Sequence[ToolSpec]:
        obj = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
        msg = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
        return (
            ToolSpec(name="shell", description="Run a shell command in your workspace.", parameters=obj),
            ToolSpec(name="publish", description="Post a message to the team channel.", parameters=msg),
        )

    async def call(self, call: ToolCall, *, phase: ToolPhase, awaiting: str | None = None) -> ToolOutcome:
        tools, config = self._tools, self._tools.config
        emit = tools.ctx.emit
        action = f"tool({call.name})"
        await emit(
            ToolCalled(
                agent_id=self._agent_id, call_id=call.id, tool=call.name, arguments=dict(call.arguments)
            )
        )
        if call.name in config.deny:
            await self._decided(call, action, "deny", executed=False, reason="denied by rule")
            return ToolOutcome(content=f"Denied: {action} is not allowed (denied by rule).", is_error=True)
        if call.name in config.side_effects and phase == "coordination":
            await self._decided(
                call, action, "allow", executed=False, reason="side effect deferred to final phase"
            )
            return ToolOutcome(content="Deferred: describe this in your answer; the winner performs it.")
        tools.executions.append(Execution(self._agent_id, call.name, phase, dict(call.arguments)))
        await self._decided(call, action, "allow", executed=True, reason="ok")
        return ToolOutcome(content=f"ok: {call.name} ran")

    async def _decided(
        self, call: ToolCall, action: str, decision: Any, *, executed: bool, reason: str
    ) -> None:
        await self._tools.ctx.emit(
            ToolDecided(
                agent_id=self._agent_id, call_id=call.id, tool=call.name, action=action, decision=decision,
                risk="low", layer="rule", reason=reason, executed=executed,
            )
        )  # fmt: skip


class FakeRunTools:
    """`RunTools` for scenario tests; records executions."""

    def __init__(self, ctx: RunContext, config: FakeToolsConfig) -> None:
        self.ctx = ctx
        self.config = config
        self.executions: list[Execution] = []
        self.closed = False
        self.parked = False
        self.close_reason: str | None = None

    def for_agent(self, agent_id: str) -> FakeToolbox:
        return FakeToolbox(self, agent_id)

    async def winner_patch(self, agent_id: str) -> str | None:
        return self.config.patch

    async def park(self) -> None:
        self.parked = True

    async def close(self, reason: str) -> None:
        self.closed = True
        self.close_reason = reason

    async def apply_patch(self, agent_id: str, patch: str, *, awaiting: str | None = None) -> ToolOutcome:
        """Refused: scenario fakes have no source to write (the real toolbox asks the gate)."""
        return ToolOutcome(content="the run's tools cannot apply a patch", is_error=True)


class FakeToolsFactory:
    """A `RunToolsFactory` that remembers the `FakeRunTools` it built."""

    def __init__(self, config: FakeToolsConfig | None = None) -> None:
        self.config = config or FakeToolsConfig()
        self.built: FakeRunTools | None = None

    async def __call__(self, ctx: RunContext) -> FakeRunTools:
        self.built = FakeRunTools(ctx, self.config)
        return self.built


async def ended(handle: RunHandle) -> Terminal:
    """The terminal event of a run that asks nobody; a park fails the caller (it has no driver).

    A run that may ask goes through `orchestrator.RunDriver`, which resumes it after each decision.
    """
    outcome = await handle.outcome()
    if isinstance(outcome, Parked):
        raise AssertionError(f"run {outcome.run_id} parked on {', '.join(outcome.waiting)}")
    return outcome


# ---- teams --------------------------------------------------------------------------------------


def scripted_team(n: int, *, model: str = "scripted", **orchestrator: Any) -> TeamConfig:
    """`n` agents `a0..a{n-1}` on the OpenAI type (never called: pass `ScriptedModels`), free model prices."""
    agents = [AgentConfig(id=f"a{i}", backend=BackendConfig(type="openai", model=model)) for i in range(n)]
    return TeamConfig(
        agents=agents,
        orchestrator=OrchestratorConfig(**orchestrator),
        prices={model: PriceConfig(input_per_mtok=0.0, output_per_mtok=0.0)},
    )


class ScriptedModels:
    """A `models=` factory for `start_run`: one `ScriptedModelClient` per agent id, kept in `clients`."""

    def __init__(self, scripts: dict[str, Sequence[Turn | Script]] | None = None, *, then: Script = protocol):
        self._scripts = scripts or {}
        self._then = then
        self.clients: dict[str, ScriptedModelClient] = {}

    def __call__(self, agent: AgentConfig) -> ScriptedModelClient:
        client = ScriptedModelClient(
            *self._scripts.get(agent.id, ()), then=self._then, model=agent.backend.model
        )
        self.clients[agent.id] = client
        return client

    @property
    def calls(self) -> int:
        """Model calls made by all agents."""
        return sum(len(c.requests) for c in self.clients.values())

    @property
    def prompt_chars(self) -> int:
        return sum(r.prompt_chars() for c in self.clients.values() for r in c.requests)
