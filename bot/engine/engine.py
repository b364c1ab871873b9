"""The DBOS adapter: launch, the runs queue, submit / wake / control, heartbeats and the janitor.

One `Engine` per process. Every process registers the queue (DBOS leaves runs enqueued on a
queue a process never registered); only those that execute runs listen to it. Launching recovers
this executor's own pending runs; the janitor, in every executing process, recovers those of
workers that are gone (`DBOS._recover_pending_workflows`, internal API: dbos is pinned and a test
covers it).

No false deaths. A heartbeat that could not be written because the database was away says
nothing about its worker, so a stale heartbeat alone is no proof. A worker's runs are taken over
only when:

- it said it left for good (`leave`), or
- its last heartbeat is older than `dead_after` by the database's own clock (it is stamped by
  the database and judged by it: no two machines' clocks are compared), and the judge itself has
  reached the database without a failure (each heartbeat, each janitor query) for `dead_after`
  since its last failed access. The victim was then silent through `dead_after` of the database's
  uptime: a live worker beats within `heartbeat_interval` of the database coming back.

And before anyone may judge it so, a worker that cannot write its heartbeat self-fences: once its
last successful beat (timed from when that beat began) is `dead_after / 2` old, no run step starts
or resumes here until a beat succeeds again, `/readyz` says so (503: a balancer stops sending it
work), and `on_fence` is told (a hook for operators and tests). A run in flight makes no stored
progress meanwhile either: its events go to the same database, and a run never goes on
unpersisted (`orchestrator.run.emitter`, fail-stop); what it does without writing (a model call,
a tool already stored as started) ends at its next write.

If a worker comes back after its runs were taken over (a partition, a stalled machine), the run
store fences it: every write of a run names its seq, and a different event at a stored seq raises
`RunFenced`, so the first of two drivers to write a seq wins and the other stops for good
(`workflow.execute_step`, `FENCED`). That seq is the run's lease generation: no epoch of its own.
A database outage shorter than the judge's `heartbeat_interval` may go unseen by it; the victim
then missed at most one beat of the `dead_after / heartbeat_interval` it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dbos import DBOS, Queue, SetWorkflowID
from dbos._error import DBOSNonExistentWorkflowError  # dbos is pinned (==3.4.0)
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.engine.config import EngineConfig
from bot.engine.limits import ProviderLimits
from bot.engine.tables import Action, Control, EngineTables
from bot.engine.workflow import WAKE, RunExecutor, drain, fence, host, open_steps, run_workflow, unhost

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
        # Called (with how long the beats have failed) when this worker fences itself.
        self.on_fence: Callable[[float], Awaitable[object]] | None = None
        self.fenced = False  # its heartbeat failed for `fence_after` s: no run step starts here
        # Called after each heartbeat with how many processes are live (this one included): they
        # share the workspace's Slack budget. One that died counts until `dead_after`, one that
        # left (`leave`) no more: a share is given back late, never taken early.
        self.on_peers: Callable[[int], None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._last_beat = time.monotonic()  # when the last successful heartbeat began
        self._reachable_since: float | None = None  # since when every database access succeeded
        # What each model request is admitted by (`orchestrator.ports.CallAdmission`).
        self.admission = ProviderLimits(
            config.limits, database, poll=config.limit_poll, holder=config.executor_id
        )

    async def launch(self, executor: RunExecutor | None, *, paused: bool = False) -> None:
        """Start DBOS (recovering this executor's pending runs) and register the runs queue.

        `paused`: the runs' steps (the recovered ones first of all) wait until `open_steps()`, so
        the start-up work that must come before them is not starved by them.
        """
        started = time.perf_counter()
        await self.tables.create_schema()
        if executor is not None and self.config.executes:
            host(executor, asyncio.get_running_loop(), park_timeout=self.config.park_timeout, paused=paused)
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
        if self.config.executes:
            self._watch = asyncio.create_task(self._watch_forever(), name="engine-fence")
        log.info(
            "engine launched in %.2f s: executor %s, role %s, version %s",
            self.launch_seconds,
            self.config.executor_id,
            self.config.role,
            self.config.application_version,
        )

    def open_steps(self) -> None:
        """Let the runs' steps held by `launch(paused=True)` begin."""
        open_steps()

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

    @property
    def fence_after(self) -> float:
        """Seconds without a successful heartbeat after which this worker stops starting run steps."""
        return self.config.dead_after / 2

    def up_for(self) -> float:
        """Seconds this process has reached the database without a failure (0 right after one)."""
        since = self._reachable_since
        return 0.0 if since is None else time.monotonic() - since

    async def heartbeat(self) -> None:
        """Say this executor is alive; an executing process then takes over gone workers' runs."""
        cfg = self.config
        began = time.monotonic()
        async with self._access():
            await self.tables.beat(cfg.executor_id, cfg.role, cfg.application_version)
        self._last_beat = began
        if self.fenced:
            self._unfence()
        if self.on_peers is not None:
            async with self._access():
                live = await self.tables.live(within=cfg.dead_after)
            self.on_peers(max(live, 1))
        if cfg.executes:
            await self.janitor()

    @contextlib.asynccontextmanager
    async def _access(self) -> AsyncIterator[None]:
        """One access to the database, bounded: a failure restarts this process's uptime."""
        try:
            async with asyncio.timeout(max(self.fence_after / 2, self.config.heartbeat_interval)):
                yield
        except BaseException:
            self._reachable_since = None
            raise
        if self._reachable_since is None:
            self._reachable_since = time.monotonic()

    async def janitor(self, *, dead_after: float | None = None) -> list[str]:
        """Recover the pending runs of workers proven gone (see the module); their workflow ids."""
        silence = self.config.dead_after if dead_after is None else dead_after
        async with self._access():
            silent = await self.tables.silent(older_than=silence, but=self.config.executor_id)
        up = self.up_for()
        dead = [s.executor_id for s in silent if s.left or up >= silence]
        if len(dead) < len(silent):
            log.info(
                "janitor: %d worker(s) silent, but this process has reached the database for only %.1f s;"
                " not judged yet",
                len(silent) - len(dead),
                up,
            )
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
            except Exception as exc:  # a database hiccup must not end the heartbeat
                log.warning("engine heartbeat failed: %s: %s", type(exc).__name__, exc)

    async def _watch_forever(self) -> None:
        """Fence this worker once its heartbeat has failed for `fence_after` s (timed here, not by a beat)."""
        while True:
            await asyncio.sleep(self.fence_after / 10)
            silent_for = time.monotonic() - self._last_beat
            if not self.fenced and silent_for >= self.fence_after:
                await self._fence(silent_for)

    async def _fence(self, silent_for: float) -> None:
        self.fenced = True
        fence(True)
        log.error(
            "engine: no heartbeat stored for %.1f s; this worker starts no run step until one is",
            silent_for,
        )
        if self.on_fence is not None:
            try:
                await self.on_fence(silent_for)
            except Exception:
                log.exception("engine: on_fence failed")

    def _unfence(self) -> None:
        self.fenced = False
        fence(False)
        log.warning("engine: heartbeat stored again; run steps start here again")

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
        if self.fenced:
            return f"engine: fenced, no heartbeat stored for {time.monotonic() - self._last_beat:.0f} s"
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
        for task in (self._beats, self._watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.launched:
            self.launched = False
            if not destroy:
                return
            await asyncio.to_thread(DBOS.destroy)
            # DBOS made its thread pool the loop's default executor and has just shut it down.
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor())

    async def leave(self) -> None:
        """The very last thing before the process ends: other workers may take this one's runs now.

        Without it they wait `dead_after` s, and count it as sharing the Slack budget meanwhile.
        Not for `local` (the embedded default recovers its own runs when it starts again).
        """
        cfg = self.config
        if cfg.executor_id != "local":
            with contextlib.suppress(Exception):
                await self.tables.beat(cfg.executor_id, cfg.role, cfg.application_version, left=True)


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
