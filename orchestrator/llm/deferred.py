"""A model client whose SDK loads off the event loop, when its first turn starts.

Importing a vendor SDK is CPU work (thousands of pydantic models: about 0.6 s for `openai`, 1.4 s for
`anthropic` on the bench machine). Built up front, every client of a team would hold the run's first
request until the slowest SDK had loaded, with the event loop blocked all the while. A deferred
client has its SDK imported in one loader thread shared by the process, so SDKs load one at a time
in the order turns ask for them, each once, and the loop stays free: the first agent's request goes
out while the next agent's SDK is still loading. The key and the URL are resolved before (by the
factory), so a misconfiguration is still an error when the client is made.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from orchestrator.errors import ProviderError
from orchestrator.llm.lazy import BuiltOnFirstUse
from orchestrator.ports import ModelClient

# One thread: two SDKs importing at once would share the interpreter lock and both finish late.
_LOADER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sdk-loader")
_SDKS: dict[str, Future[object]] = {}  # provider -> its SDK's import (process-wide, loop-agnostic)
_SDKS_LOCK = threading.Lock()


def start_loading(provider: str, load: Callable[[], object]) -> Future[object]:
    """The import of `provider`'s SDK: started once, started again only if it failed."""
    with _SDKS_LOCK:
        future = _SDKS.get(provider)
        if future is None or (future.done() and future.exception() is not None):
            future = _SDKS[provider] = _LOADER.submit(load)
        return future


def after_sdk_loads(callback: Callable[[], object]) -> Future[object]:
    """Run `callback` in the loader thread once every SDK import started so far has finished.

    The loader is one thread taking its work in order, so this is simply the next item. The CLI
    turns the garbage collector back on this way once its start-up imports are done.
    """
    return _LOADER.submit(callback)


class DeferredClient(BuiltOnFirstUse):
    """A `ModelClient` whose SDK (`load`) is imported in the loader thread before `build` runs."""

    def __init__(
        self, build: Callable[[], ModelClient], *, provider: str, model: str, load: Callable[[], object]
    ) -> None:
        super().__init__(model)
        self._build = build
        self._load = load
        self._provider = provider
        self._building: asyncio.Future[ModelClient] | None = None

    async def client(self) -> ModelClient:
        """The adapter, built once (a failure to build is a `ProviderError`, not retried)."""
        if self._building is None:
            self._building = asyncio.ensure_future(self._make())
        try:
            # Shielded: a turn cancelled while the SDK loads leaves the build for the next turn.
            return await asyncio.shield(self._building)
        except Exception as exc:
            message = f"cannot build the {self._provider} client: {type(exc).__name__}: {exc}"
            raise ProviderError(self._provider, self._model, None, False, message) from exc

    async def _make(self) -> ModelClient:
        await asyncio.wrap_future(start_loading(self._provider, self._load))
        return self._build()  # the SDK is loaded: building a client is cheap

    async def close(self) -> None:
        """Close the adapter if it was built (waiting for a build under way)."""
        if self._building is None:
            return
        try:
            adapter = await self._building
        except Exception:  # it never worked, so there is nothing to close
            return
        await adapter.close()
