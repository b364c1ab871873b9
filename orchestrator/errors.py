"""The orchestrator's exception root; every error it raises derives from `OrchestratorError`.

`ToolParked` lives here too but is no error: it is the signal that a call waits for a human.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.store import LeaseHolder


class OrchestratorError(Exception):
    """Root of every error raised by `orchestrator`."""


class SandboxUnavailable(OrchestratorError):
    """Commands cannot run: bubblewrap is missing or cannot create a sandbox here."""


class WorkspaceError(OrchestratorError):
    """A workspace could not be created, read or compared."""


class PatchConflict(WorkspaceError):
    """The source changed since the run copied it, so the winner's patch would overwrite someone's work."""

    def __init__(self, message: str, *, paths: tuple[str, ...]) -> None:
        super().__init__(message)
        self.paths = paths


class TeamConfigError(OrchestratorError):
    """A team file is invalid; the message names the file, the line and the key."""

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None, key: str = ""
    ) -> None:
        self.path = path
        self.line = line
        self.key = key
        self.detail = message
        where = f"{path or '<team>'}:{line}: " if line is not None else f"{path or '<team>'}: "
        super().__init__(f"{where}{key + ': ' if key else ''}{message}")


class RunStoreError(OrchestratorError):
    """The run store could not persist or read a run's events."""


class RunStoreUnavailable(RunStoreError):
    """The run's events could not be stored within its retry window: the run suspends, to resume later."""

    def __init__(self, run_id: str, cause: BaseException) -> None:
        super().__init__(f"run {run_id}: the run store is unavailable ({cause!r})")
        self.run_id = run_id
        self.cause = cause


class ProviderConfigError(OrchestratorError):
    """A model client cannot be built: unknown backend type, or no API key where one is needed."""


class ProviderError(OrchestratorError):
    """A model call failed; `retryable` says whether trying again later may succeed.

    `status` is the HTTP status (None for timeouts, connection and stream errors); `retry_after`
    is the wait in seconds the provider asked for, when it said.
    """

    def __init__(
        self,
        provider: str,
        model: str,
        status: int | None,
        retryable: bool,
        message: str,
        *,
        retry_after: float | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.status = status
        self.retryable = retryable
        self.message = message
        self.retry_after = retry_after
        where = f"{provider} {model}" + (f" HTTP {status}" if status is not None else "")
        super().__init__(f"{where}: {message}")


class RunNotResumable(OrchestratorError):
    """`resume_run` was given a run that is unknown, already ended, or started with other agents."""


class ToolParked(BaseException):
    """A tool call waits for a human: the agent's task (or the run's final step) ends here.

    Not an error, and outside the error tree on purpose: like `asyncio.CancelledError` it derives
    from `BaseException`, so a broad `except Exception` never swallows it and needs no guard. The
    run catches it where a task ends and parks; `request_id` is the approval request the call is
    parked on, and the call resumed with it decided goes on.
    """

    def __init__(self, request_id: str) -> None:
        super().__init__(f"parked on approval {request_id}")
        self.request_id = request_id


class RunBusy(RunStoreError):
    """Another process drives this run (it holds the run's lease); `holder` says who, when known."""

    def __init__(self, run_id: str, holder: LeaseHolder | None = None) -> None:
        self.run_id = run_id
        self.holder = holder
        who = f" ({holder.describe()})" if holder is not None else ""
        super().__init__(f"run {run_id} is being driven by another process{who}")


class RunFenced(RunStoreError):
    """Another process already stored a different event at this run's seq: it drives the run now.

    The writer that gets this must stop at once (nothing it did since is stored or shown): two
    drivers of one run meet at the first seq both write, and only the first write stands.
    """

    def __init__(self, run_id: str, seq: int) -> None:
        super().__init__(f"run {run_id}: seq {seq} was stored by another driver")
        self.run_id = run_id
        self.seq = seq
