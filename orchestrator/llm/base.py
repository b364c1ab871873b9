"""The model port's values: a provider-neutral conversation and the items of one streamed turn.

Adapters (`openai.py`, `anthropic.py`) translate this to and from each wire format; the
coordination code only ever sees these types. The port itself is `orchestrator.ports.ModelClient`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A function the model may call; `parameters` is a JSON Schema object."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A completed tool call. `arguments` is the parsed JSON object (empty if unparsable, see `raw`)."""

    id: str
    name: str
    arguments: Mapping[str, Any]
    raw_arguments: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    role: Literal["user"] = "user"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    role: Literal["assistant"] = "assistant"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultMessage:
    role: Literal["tool"] = "tool"
    call_id: str
    name: str
    content: str
    is_error: bool = False


Message = UserMessage | AssistantMessage | ToolResultMessage


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    kind: Literal["text_delta"] = "text_delta"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallReady:
    kind: Literal["tool_call"] = "tool_call"
    call: ToolCall


StopReason = Literal["end_turn", "tool_use", "max_tokens", "other"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnd:
    """Always the last item of a successful stream."""

    kind: Literal["turn_end"] = "turn_end"
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)


StreamItem = TextDelta | ToolCallReady | TurnEnd
