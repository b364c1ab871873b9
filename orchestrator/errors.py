"""The orchestrator's exception root; every error it raises derives from `OrchestratorError`."""

from __future__ import annotations


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
