"""The DBOS adapter: launch, the runs queue, submit / wake / control, heartbeats and the janitor.

One `Engine` per process. Every process registers the queue (DBOS leaves runs enqueued on a
queue a process never registered); only those that execute runs listen to it. Launching recovers
this executor's own pending runs; the janitor, in every executing process, recovers those of
workers whose heartbeat stopped (`DBOS._recover_pending_workflows`, internal API: dbos is pinned
and a test covers it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dbos import DBOS, Queue, SetWorkflowID
from dbos._error import DBOSNonExistentWorkflowError  # dbos is pinned (==3.4.0)
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.engine.config import EngineConfig
from bot.engine.limits import ProviderLimits
from bot.engine.tables import Action, Control, EngineTables
from bot.engine.workflow import WAKE, RunExecutor, drain, host, run_workflow, unhost

log = logging.getLogger(__name__)

RUNS_QUEUE = "runs"
DBOS_LOGGER = "dbos"
DBOS_CONSOLE_HANDLER = "__dbos_console_log_handler__"  # the handler DBOS adds when its logger has none
HELD = frozenset({"PENDING", "ENQUEUED", "DELAYED"})  # workflow states that will still run


class Engine:
    """This process's part in running runs durably."""

    def __init__(self, config: EngineConfig, database: AsyncEngine) -> None:
        self.config = config
        self.tables = EngineTables(database)
        # Called with the dead executors' ids when the janitor takes their runs over.
        self.on_takeover: Callable[[list[str]], Awaitable[object]] | None = None
        self._queue: Queue | None = None
        self._beats: asyncio.Task[None] | None = None
        self.launched = False
        self.launch_seconds = 0.0
        self.recovered: list[str] = []  # workflows the janitor took over from dead workers
        # What each model request is admitted by (`orchestrator.ports.CallAdmission`).
        # DBOS's clock on SQLite has whole seconds before Python 3.12 (`unixepoch('subsec')`).
        coarse = config.system_database_url.startswith("sqlite") and sys.version_info < (3, 12)
        self.admission = ProviderLimits(config.limits, poll=config.limit_poll, whole_seconds=coarse)

    async def launch(self, executor: RunExecutor | None) -> None:
        """Start DBOS (recovering this executor's pending runs) and register the runs queue."""
        started = time.perf_counter()
        await self.tables.create_schema()
        if executor is not None and self.config.executes:
            host(executor, asyncio.get_running_loop(), park_timeout=self.config.park_timeout)
        await asyncio.to_thread(self._launch)
        self._queue = await DBOS.register_queue_async(
            RUNS_QUEUE,
            worker_concurrency=self.config.worker_concurrency,
            polling_interval_sec=self.config.poll_interval,
            # Workers set the queue's concurrency (a setting of the queue, shared by all); a front
            # end only makes sure the queue exists.
            on_conflict="always_update" if self.config.executes else "never_update",
        )
        await self.admission.register(update=self.config.executes)
        self.launched = True
        self.launch_seconds = time.perf_counter() - started
        await self.heartbeat()
        self._beats = asyncio.create_task(self._beat_forever(), name="engine-heartbeat")
        log.info(
            "engine launched in %.2f s: executor %s, role %s, version %s",
            self.launch_seconds,
            self.config.executor_id,
            self.config.role,
            self.config.application_version,
        )

    def _launch(self) -> None:
        route_dbos_logs()
        DBOS(config=self.config.dbos())  # type: ignore[arg-type]  # a plain dict of DBOSConfig keys
        if not self.config.executes:
            DBOS.listen_queues([])  # a front end enqueues runs, never dequeues them
        DBOS.launch()

    async def submit(self, run_id: str, payload: dict[str, Any]) -> None:
        """Enqueue the run's workflow (id = run id: submitting the same run twice runs it once)."""
        if self._queue is None:
            raise RuntimeError("the engine is not launched")
        with SetWorkflowID(run_id):
            await self._queue.enqueue_async(run_workflow, run_id, payload)

    async def wake(self, run_id: str, message: Any = "wake") -> bool:
        """Wake a parked run wherever it is (a decision, a control, expiry); whether it was sent.

        A run the engine never held (one that `massgen-bot run` made, or older than the engine)
        has nothing to wake: that is not an error.
        """
        try:
            await DBOS.send_async(run_id, message, WAKE)
        except DBOSNonExistentWorkflowError:
            log.debug("wake: run %s is not an engine workflow", run_id)
            return False
        return True

    async def control(self, run_id: str, action: Action, by: str | None) -> None:
        """Cancel or finish a run held by any worker, or parked."""
        await self.tables.ask(run_id, action, by)
        await self.wake(run_id, {"control": action})

    async def take_controls(self, run_ids: list[str]) -> list[Control]:
        """Controls waiting for the runs this process holds."""
        return await self.tables.take(run_ids)

    async def heartbeat(self) -> None:
        """Say this executor is alive; an executing process then takes over dead workers' runs."""
        cfg = self.config
        await self.tables.beat(cfg.executor_id, cfg.role, cfg.application_version)
        if cfg.executes:
            await self.janitor()

    async def janitor(self, *, dead_after: float | None = None) -> list[str]:
        """Recover the pending runs of workers silent for `dead_after` s; their workflow ids."""
        silence = self.config.dead_after if dead_after is None else dead_after
        dead = await self.tables.silent(since=time.time() - silence, but=self.config.executor_id)
        if not dead:
            return []
        handles = await asyncio.to_thread(DBOS._recover_pending_workflows, dead)
        if self.on_takeover is not None:  # their unsent Slack posts too (the outbox's rows)
            await self.on_takeover(dead)
        await self.tables.forget(dead)
        ids = [h.get_workflow_id() for h in handles]
        self.recovered += ids
        log.warning("janitor: took over %d run(s) of %s", len(ids), ", ".join(dead))
        return ids

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            try:
                await self.heartbeat()
            except Exception:  # a database hiccup must not end the heartbeat
                log.exception("engine heartbeat failed")

    async def status(self, run_id: str) -> str | None:
        """The workflow's DBOS status (PENDING, ENQUEUED, SUCCESS, ERROR, ...), None when unknown."""
        found = await DBOS.get_workflow_status_async(run_id)
        return None if found is None else found.status

    async def holds(self, run_id: str) -> bool:
        """Whether the run's workflow will still run (pending or queued, on any executor)."""
        return await self.status(run_id) in HELD

    async def holding(self, run_ids: Sequence[str]) -> set[str]:
        """Which of these runs' workflows will still run, in one query (start-up asks about all at once)."""
        if not run_ids:
            return set()
        found = await DBOS.list_workflows_async(
            workflow_ids=list(run_ids), status=sorted(HELD), load_input=False, load_output=False
        )
        return {w.workflow_id for w in found}

    async def ready(self) -> str | None:
        """None when the engine is launched and its system database answers, else why not."""
        if not self.launched:
            return "engine not launched"
        try:
            async with asyncio.timeout(2.0):
                await DBOS.list_workflows_async(limit=1)
        except Exception as exc:  # any failure means not ready; the reason goes to /readyz
            return f"engine: {type(exc).__name__}: {exc}"[:200]
        return None

    def drain(self) -> None:
        """Take no new runs here: one dequeued from now on stays pending for the next process."""
        drain()

    async def close(self, *, destroy: bool = True) -> None:
        """Stop; pending runs stay pending.

        `destroy=False` when runs were left running and the process is about to end: DBOS's
        shutdown would wait for their steps (which never return now) for its full timeout.
        """
        unhost()
        self.admission.forget()
        if self._beats is not None:
            self._beats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beats
        if self.launched:
            self.launched = False
            if not destroy:
                return
            await asyncio.to_thread(DBOS.destroy)
            # DBOS made its thread pool the loop's default executor and has just shut it down.
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor())

    async def leave(self) -> None:
        """The very last thing before the process ends: other workers may take this one's runs now.

        Without it they wait `dead_after` s. Not for `local` (the embedded default recovers its
        own runs when it starts again).
        """
        cfg = self.config
        if cfg.executes and cfg.executor_id != "local":
            with contextlib.suppress(Exception):
                await self.tables.beat(cfg.executor_id, cfg.role, cfg.application_version, at=0.0)


def route_dbos_logs() -> None:
    """DBOS's log records go through this process's logging (JSON lines, redaction, the level set).

    Left alone, DBOS gives its logger a console handler of its own, bound to whatever `sys.stderr`
    is at that moment, and stops propagation: its lines would skip the redacting JSON formatter.
    A handler already on the logger stops DBOS from adding one.
    """
    logger = logging.getLogger(DBOS_LOGGER)
    for handler in list(logger.handlers):
        if handler.name == DBOS_CONSOLE_HANDLER:
            logger.removeHandler(handler)
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = True


__all__ = ["RUNS_QUEUE", "Engine", "route_dbos_logs"]
