"""Model providers behind one small streaming port (`orchestrator.ports.ModelClient`).

The conversation and stream types load eagerly; the factory and the warm-up load on first use,
and each SDK only when a client of its kind is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from approvals import lazy_exports
from orchestrator.llm.base import (
    AssistantMessage,
    Message,
    OutputSchema,
    StopReason,
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
from orchestrator.llm.retry import RetryPolicy, parse_retry_after

if TYPE_CHECKING:
    from orchestrator.llm.deferred import after_sdk_loads
    from orchestrator.llm.factory import BACKEND_TYPES, make_model_client, preload_sdks, resolve_api_key
    from orchestrator.llm.limits import CallLimit, LocalLimits, margin
    from orchestrator.llm.warmup import warm_up

_LAZY = {
    "after_sdk_loads": "orchestrator.llm.deferred",
    "BACKEND_TYPES": "orchestrator.llm.factory",
    "CallLimit": "orchestrator.llm.limits",
    "LocalLimits": "orchestrator.llm.limits",
    "make_model_client": "orchestrator.llm.factory",
    "margin": "orchestrator.llm.limits",
    "preload_sdks": "orchestrator.llm.factory",
    "resolve_api_key": "orchestrator.llm.factory",
    "warm_up": "orchestrator.llm.warmup",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "BACKEND_TYPES",
    "AssistantMessage",
    "CallLimit",
    "LocalLimits",
    "Message",
    "OutputSchema",
    "RetryPolicy",
    "StopReason",
    "StreamItem",
    "TextDelta",
    "ToolCall",
    "ToolCallReady",
    "ToolResultMessage",
    "ToolSpec",
    "TurnEnd",
    "Usage",
    "UserMessage",
    "after_sdk_loads",
    "make_model_client",
    "margin",
    "parse_retry_after",
    "preload_sdks",
    "resolve_api_key",
    "warm_up",
]
