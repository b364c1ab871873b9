"""Request parsing for the three provider wire formats the loopback server speaks.

Chat Completions (`/v1/chat/completions`), Responses (`/v1/responses`) and Anthropic Messages
(`/v1/messages`) bodies are reduced to one `ProviderRequest`. Response encoding lives in
`provider_encode.py`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tests.fakes.provider_types import Api, ProviderRequest, WireMessage


def parse_request(
    api: Api, body: dict[str, Any], *, received_at: float = 0.0, headers: Mapping[str, str] | None = None
) -> ProviderRequest:
    """Normalise a request body; raises `ValueError` when it is not an object we understand."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        raise ValueError("request body must be a JSON object with a string 'model'")
    parse = {"chat": _parse_chat, "responses": _parse_responses, "messages": _parse_messages}[api]
    system, messages, tools = parse(body)
    return ProviderRequest(
        api=api,
        model=body["model"],
        system=system,
        messages=messages,
        tools=tools,
        raw=body,
        stream=bool(body.get("stream")),
        received_at=received_at,
        headers=dict(headers or {}),
    )


def _text_of(content: Any) -> str:
    """Text of a content field that may be a string or a list of typed parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "".join(parts)


def _arguments(raw: Any) -> dict[str, Any]:
    """Tool arguments as a dict; text that is not a JSON object is kept under `_raw`."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def _parse_chat(body: dict[str, Any]) -> tuple[str, list[WireMessage], list[str]]:
    system: list[str] = []
    messages: list[WireMessage] = []
    for m in body.get("messages") or []:
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(m.get("content")))
        elif role == "user":
            messages.append(WireMessage(role="user", text=_text_of(m.get("content"))))
        elif role == "assistant":
            calls = [
                (c["function"]["name"], _arguments(c["function"].get("arguments")))
                for c in m.get("tool_calls") or []
            ]
            messages.append(WireMessage(role="assistant", text=_text_of(m.get("content")), tool_calls=calls))
        elif role == "tool":
            messages.append(
                WireMessage(role="tool", text=_text_of(m.get("content")), call_id=m.get("tool_call_id", ""))
            )
    tools = [t["function"]["name"] for t in body.get("tools") or [] if "function" in t]
    return "\n".join(system), messages, tools


def _parse_responses(body: dict[str, Any]) -> tuple[str, list[WireMessage], list[str]]:
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    messages: list[WireMessage] = []
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            call = (item.get("name", ""), _arguments(item.get("arguments")))
            if messages and messages[-1].role == "assistant":
                messages[-1].tool_calls.append(call)  # parallel calls are separate items
            else:
                messages.append(WireMessage(role="assistant", tool_calls=[call]))
        elif kind == "function_call_output":
            messages.append(
                WireMessage(role="tool", text=_text_of(item.get("output")), call_id=item["call_id"])
            )
        elif kind == "message":
            role = item.get("role")
            if role in ("system", "developer"):
                system.append(_text_of(item.get("content")))
            elif role in ("user", "assistant"):
                messages.append(WireMessage(role=role, text=_text_of(item.get("content"))))
    tools = [t["name"] for t in body.get("tools") or [] if t.get("type") == "function"]
    return "\n".join(system), messages, tools


def _parse_messages(body: dict[str, Any]) -> tuple[str, list[WireMessage], list[str]]:
    messages: list[WireMessage] = []
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if m.get("role") == "assistant":
            calls = [(b["name"], _arguments(b.get("input"))) for b in blocks if b.get("type") == "tool_use"]
            messages.append(WireMessage(role="assistant", text=text, tool_calls=calls))
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                messages.append(
                    WireMessage(
                        role="tool", text=_text_of(b.get("content")), call_id=b.get("tool_use_id", "")
                    )
                )
        if text or not any(b.get("type") == "tool_result" for b in blocks):
            messages.append(WireMessage(role="user", text=text))
    tools = [t["name"] for t in body.get("tools") or [] if "name" in t]
    return _text_of(body.get("system")), messages, tools
