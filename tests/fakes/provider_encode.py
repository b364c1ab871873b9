"""Response encoding for the loopback provider server, exactly as the 2026 SDKs parse it.

Each API gets a non-streaming JSON body and a list of SSE frames. Shapes follow the transcripts
verified with `_strict_response_validation=True` (reference/llm-and-runtime.md §1.2): Anthropic
frames carry `event:` lines, Responses events carry `sequence_number`, Chat Completions ends with
`[DONE]` after a `choices: []` usage chunk.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any

from tests.fakes.provider_types import Api, ProviderRequest, Reply

_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


def pieces(text: str) -> list[str]:
    """Split text into word-sized deltas (leading whitespace stays with its word)."""
    return re.findall(r"\s*\S+", text) or ([text] if text else [])


def _arg_pieces(arguments: str) -> list[str]:
    step = max(1, len(arguments) // 3)
    return [arguments[i : i + step] for i in range(0, len(arguments), step)] or [""]


def _calls(reply: Reply) -> list[tuple[str, str]]:
    """(name, arguments text) per tool call; strings pass through unchanged."""
    return [(n, a if isinstance(a, str) else json.dumps(a)) for n, a in reply.tool_calls]


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def encode_error(api: Api, status: int, message: str) -> dict[str, Any]:
    """The provider's error body for an HTTP status."""
    if api == "messages":
        kind = {400: "invalid_request_error", 429: "rate_limit_error", 529: "overloaded_error"}
        return {"type": "error", "error": {"type": kind.get(status, "api_error"), "message": message}}
    return {"error": {"message": message, "type": "fake_error", "param": None, "code": str(status)}}


def encode_body(req: ProviderRequest, reply: Reply, usage: tuple[int, int]) -> dict[str, Any]:
    """Non-streaming response body."""
    return {"chat": _chat_body, "responses": _responses_body, "messages": _messages_body}[req.api](
        req, reply, usage
    )


def encode_stream(req: ProviderRequest, reply: Reply, usage: tuple[int, int]) -> list[bytes]:
    """Streaming response as SSE frames, in order."""
    return {"chat": _chat_stream, "responses": _responses_stream, "messages": _messages_stream}[req.api](
        req, reply, usage
    )


# --- Chat Completions -------------------------------------------------------------------------


def _chat_usage(usage: tuple[int, int]) -> dict[str, Any]:
    i, o = usage
    return {
        "prompt_tokens": i,
        "completion_tokens": o,
        "total_tokens": i + o,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _chat_finish(reply: Reply) -> str | None:
    if reply.finish_reason is not None:
        return reply.finish_reason or None  # "" sends null
    return "length" if reply.truncated else "tool_calls" if reply.tool_calls else "stop"


def _chat_body(req: ProviderRequest, reply: Reply, usage: tuple[int, int]) -> dict[str, Any]:
    calls = [
        {"id": _next_id("call"), "type": "function", "function": {"name": n, "arguments": a}}
        for n, a in _calls(reply)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": _next_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _chat_finish(reply)}],
        "usage": _chat_usage(usage),
    }


def _chat_stream(req: ProviderRequest, reply: Reply, usage: tuple[int, int]) -> list[bytes]:
    head = {"id": _next_id("chatcmpl"), "object": "chat.completion.chunk", "created": int(time.time())}
    head |= {"model": req.model, "system_fingerprint": "fp_fake"}
    include_usage = bool((req.raw.get("stream_options") or {}).get("include_usage"))

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse(head | {"choices": [choice]} | ({"usage": None} if include_usage else {}))

    frames = [chunk({"role": "assistant", "content": "", "refusal": None})]
    frames += [chunk({"content": p}) for p in pieces(reply.text)]
    for index, (name, arguments) in enumerate(_calls(reply)):
        function = {"name": name, "arguments": ""}
        first = {"index": index, "id": _next_id("call"), "type": "function", "function": function}
        frames.append(chunk({"tool_calls": [first]}))
        frames += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
            for p in _arg_pieces(arguments)
        ]
    frames.append(chunk({}, _chat_finish(reply)))
    if include_usage:
        frames.append(_sse(head | {"choices": [], "usage": _chat_usage(usage)}))
    frames.append(b"data: [DONE]\n\n")
    return frames


# --- Responses --------------------------------------------------------------------------------


def _responses_usage(usage: tuple[int, int]) -> dict[str, Any]:
    i, o = usage
    return {
        "input_tokens": i,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": o,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": i + o,
    }


def _response_object(req: ProviderRequest, rid: str, status: str, output: list[Any]) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": req.model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "temperature": 1.0,
        "top_p": 1.0,
        "text": {"format": {"type": "text"}},
        "usage": None,
    }


def _response_items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        part = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
        msg = {"type": "message", "id": _next_id("msg"), "role": "assistant", "status": "completed"}
        items.append(msg | {"content": [part]})
    for name, arguments in _calls(reply):
        call = {"type": "function_call", "id": _next_id("fc"), "call_id": _next_id("call"), "name": name}
        items.append(call | {"arguments": arguments, "status": "completed"})
    return items


def _incomplete_reason(reply: Reply) -> str | None:
    return reply.finish_reason or ("max_output_tokens" if reply.truncated else None)


def _finished(req: ProviderRequest, reply: Reply, rid: str, items: list[Any], usage: tuple[int, int]) -> Any:
    reason = _incomplete_reason(reply)
    done = _response_object(req, rid, "incomplete" if reason else "completed", items)
    done["usage"] = _responses_usage(usage)
    if reason:
        done["incomplete_details"] = {"reason": reason}
    return done


def _responses_body(req: ProviderRequest, reply: Reply, usage: tuple[int, int]) -> dict[str, Any]:
    result: dict[str, Any] = _finished(req, reply, _next_id("resp"), _response_items(reply), usage)
    return result


def _responses_stream(req: ProviderRequest, reply: Reply, usage: tuple[int, int]) -> list[bytes]:
    seq = itertools.count()
    rid = _next_id("resp")
    items = _response_items(reply)

    def ev(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, **fields, "sequence_number": next(seq)}, kind)

    frames = [
        ev("response.created", response=_response_object(req, rid, "in_progress", [])),
        ev("response.in_progress", response=_response_object(req, rid, "in_progress", [])),
    ]
    for index, item in enumerate(items):
        if item["type"] == "message":
            frames += _message_item_events(ev, index, item)
        else:
            frames.append(ev("response.output_item.added", output_index=index, item=item | {"arguments": ""}))
            loc = {"item_id": item["id"], "output_index": index}
            frames += [
                ev("response.function_call_arguments.delta", **loc, delta=p)
                for p in _arg_pieces(item["arguments"])
            ]
            frames.append(ev("response.function_call_arguments.done", **loc, arguments=item["arguments"]))
            frames.append(ev("response.output_item.done", output_index=index, item=item))
    final = _finished(req, reply, rid, items, usage)
    frames.append(ev(f"response.{final['status']}", response=final))
    return frames


def _message_item_events(ev: Any, index: int, item: dict[str, Any]) -> list[bytes]:
    text = item["content"][0]["text"]
    loc = {"item_id": item["id"], "output_index": index, "content_index": 0}
    empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    frames = [
        ev(
            "response.output_item.added",
            output_index=index,
            item=item | {"status": "in_progress", "content": []},
        ),
        ev("response.content_part.added", **loc, part=empty),
    ]
    frames += [ev("response.output_text.delta", **loc, delta=p, logprobs=[]) for p in pieces(text)]
    frames.append(ev("response.output_text.done", **loc, text=text, logprobs=[]))
    frames.append(ev("response.content_part.done", **loc, part=item["content"][0]))
    frames.append(ev("response.output_item.done", output_index=index, item=item))
    return frames


# --- Anthropic Messages -----------------------------------------------------------------------


def _stop_reason(reply: Reply) -> str | None:
    if reply.finish_reason is not None:
        return reply.finish_reason or None  # "" sends null
    return "max_tokens" if reply.truncated else "tool_use" if reply.tool_calls else "end_turn"


def _messages_body(req: ProviderRequest, reply: Reply, usage: tuple[int, int]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for name, arguments in _calls(reply):
        # A non-streamed tool_use carries a parsed object; invalid JSON cannot be expressed here.
        parsed = json.loads(arguments) if arguments.strip().startswith("{") else {}
        content.append({"type": "tool_use", "id": _next_id("toolu"), "name": name, "input": parsed})
    return {
        "id": _next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def _messages_stream(req: ProviderRequest, reply: Reply, usage: tuple[int, int]) -> list[bytes]:
    def ev(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, **fields}, kind)

    start = _messages_body(req, Reply(), (usage[0], 1)) | {"stop_reason": None}
    frames = [ev("message_start", message=start), ev("ping")]
    index = 0
    if reply.text:
        frames.append(ev("content_block_start", index=index, content_block={"type": "text", "text": ""}))
        frames += [
            ev("content_block_delta", index=index, delta={"type": "text_delta", "text": p})
            for p in pieces(reply.text)
        ]
        frames.append(ev("content_block_stop", index=index))
        index += 1
    for name, arguments in _calls(reply):
        block = {"type": "tool_use", "id": _next_id("toolu"), "name": name, "input": {}}
        frames.append(ev("content_block_start", index=index, content_block=block))
        frames += [
            ev("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": p})
            for p in _arg_pieces(arguments)
        ]
        frames.append(ev("content_block_stop", index=index))
        index += 1
    delta = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    frames.append(ev("message_delta", delta=delta, usage={"output_tokens": usage[1]}))
    frames.append(ev("message_stop"))
    return frames
