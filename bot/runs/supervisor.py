"""The run supervisor: a process's two halves of a run, the front end's and the worker's, joined once.

A front end (`--role frontend`) only submits and wakes runs (`RunSubmitter`); a worker only
executes what the engine hands it (`RunExecutor.execute`, the engine's step); the one process of a
small install does both. They share one `Handover`: a submission (or a wake) waits until its run
begins here, so `wait_idle` covers the time a run spends queued. Nothing else passes between them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.runs.executor import ActiveRun, ExecutorOptions, RunExecutor, ToolsBuilder
from bot.runs.request import RunRequest
from bot.runs.submitter import Handover, RunSubmitter

if TYPE_CHECKING:
    from bot.engine import Engine


class RunSupervisor:
    """Starts runs (the submitter) and drives the ones this process holds (the executor)."""

    def __init__(self, options: ExecutorOptions, *, engine: Engine) -> None:
        self.engine = engine
        handover = Handover()  # between this process's submitter and its executor
        self.executor = RunExecutor(options, engine=engine, handover=handover)
        spawn = self.executor.spawn_named
        self.submitter = RunSubmitter(engine, handover, spawn, self.executor.segment_ended)

    @property
    def started(self) -> int:
        """How many runs this process has driven (begun or resumed)."""
        return self.executor.started

    def start(self, request: RunRequest) -> str:
        """Submit a run (the front end's half: `RunSubmitter`); its id at once."""
        return self.submitter.start(request)

    def wake(self, run_id: str, message: Any) -> None:
        """Wake a parked run through the engine (an approval of it ended, here or anywhere)."""
        self.submitter.wake(run_id, message)

    async def execute(self, run_id: str, payload: dict[str, Any]) -> str:
        """The engine's step (the worker's half: `RunExecutor`); how the run ended."""
        return await self.executor.execute(run_id, payload)

    def active(self, run_id: str) -> ActiveRun | None:
        return self.executor.active(run_id)

    def active_runs(self, channel: str | None = None) -> list[ActiveRun]:
        return self.executor.active_runs(channel)

    async def stop(self, *, grace: float = 10.0) -> int:
        """Shutdown: accept no more runs; let runs end within `grace` s and leave the rest.

        A run left behind stays pending in the engine and resumes on the next start (or on another
        worker); its approvals stay open. Returns how many runs were left running.
        """
        self.submitter.closing = True
        return await self.executor.stop(grace=grace)


__all__ = ["ActiveRun", "ExecutorOptions", "RunRequest", "RunSupervisor", "ToolsBuilder"]
