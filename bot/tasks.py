"""The one supervisor of the bot's background tasks: keeps a reference to each, drains them on shutdown.

The event loop keeps only weak references to tasks and Bolt drops its own futures, so every task
the bot starts (runs, clicks, Home publishes, message rewrites) is created here and kept until it
ends; a failure is logged, never lost (ruff RUF006).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class TaskSupervisor:
    """Owns every background task of one bot process."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closing = False

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run `coro` in a task kept until it ends; failures are logged, never lost."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._reap)
        return task

    def _reap(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    async def drain(self, *, grace: float = 10.0, keep: str | None = None) -> None:
        """Shutdown: await every task for up to `grace` s, then cancel what is left.

        Tasks named with the prefix `keep` are neither awaited nor cancelled (runs the engine
        leaves pending: cancelling one would record its end).
        """
        self.closing = True
        tasks = {t for t in self._tasks if keep is None or not t.get_name().startswith(keep)}
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)

    async def wait_idle(self, *, within: float = 30.0) -> None:
        """Until no task is left (tests and benches); raises TimeoutError."""
        async with asyncio.timeout(within):
            while self._tasks:
                await asyncio.wait(set(self._tasks))

    @property
    def count(self) -> int:
        """Tasks still running."""
        return len(self._tasks)


__all__ = ["TaskSupervisor"]
