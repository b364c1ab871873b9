"""The engine's configuration: where DBOS keeps its state, who this process is, what it does.

Read from the bot's settings once at start-up. Two things make a deploy safe: the application
version is pinned (DBOS's default is a hash of the workflow code, so any code change would strand
the runs waiting for a human), and every worker has a stable executor id (a restarted worker then
recovers its own runs; the janitor takes over those of one that never comes back).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from bot.settings import BotSettings, ProviderLimit

Role = Literal["all", "frontend", "worker"]

APP_NAME = "massgen"
PACKAGE = "massgen-chatops"
SYSTEM_DB_FILE = "dbos.sqlite"
PARKED = "parked"  # what a run's step returns when the run waits for a human
SUSPENDED = "suspended"  # ... when its store could not take its events: run the step again later
FENCED = "fenced"  # ... when another process stored its events first: it drives the run now
SUSPEND_RETRY = 2.0  # seconds before a suspended run's step runs again


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """What one process tells DBOS, and how it takes part in running runs."""

    system_database_url: str
    executor_id: str = "local"
    application_version: str = "0"
    role: Role = "all"
    worker_concurrency: int = 4
    # Seconds between a queue's polls for new runs, and (SQLite) between wake-up checks of `recv`.
    poll_interval: float = 1.0
    heartbeat_interval: float = 5.0
    # A worker silent this long, while the judge reached the database all along, is taken over by
    # the janitor; one that cannot store its heartbeat for half of it starts no run step.
    dead_after: float = 30.0
    # A parked run re-checks itself at least this often (its approvals' expiry has its own branch).
    park_timeout: float = 6 * 3600.0
    # Per-provider limits held by all workers together (`MASSGEN_PROVIDER_LIMITS`), and the seconds
    # between a waiting call's tries for a permit (`bot.engine.limits`).
    limits: Mapping[str, ProviderLimit] = field(default_factory=dict)
    limit_poll: float = 0.05

    @property
    def executes(self) -> bool:
        """Whether this process runs runs (a worker, or the embedded default)."""
        return self.role != "frontend"

    def dbos(self) -> dict[str, Any]:
        """The `DBOSConfig` for this process."""
        return {
            "name": APP_NAME,
            "system_database_url": self.system_database_url,
            "executor_id": self.executor_id,
            "application_version": self.application_version,
            "notification_listener_polling_interval_sec": self.poll_interval,
            "log_level": "WARNING",
        }


def package_version() -> str:
    """The installed distribution's version (the default application version)."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "0"


def state_folder(settings: BotSettings) -> Path:
    """Where this machine keeps its state: `MASSGEN_STATE_DIR`, else the SQLite file's folder, else here."""
    if settings.state_dir is not None:
        return settings.state_dir
    scheme, _, rest = settings.resolved_database_url().partition("://")
    path = rest.removeprefix("/")  # sqlite:///x → "x" (relative), sqlite:////x → "/x"
    if scheme.startswith("postgres") or not path or path == ":memory:":
        return Path()
    return Path(path).parent


def system_database_url(settings: BotSettings) -> str:
    """The same PostgreSQL as the bot's database; on SQLite, a file of its own beside the bot's."""
    scheme, _, rest = settings.resolved_database_url().partition("://")
    if scheme.startswith("postgres"):
        return f"postgresql://{rest}"  # DBOS brings its own (sync) driver, psycopg
    return f"sqlite:///{(state_folder(settings) / SYSTEM_DB_FILE).as_posix()}"


def engine_config(settings: BotSettings, *, role: Role | None = None) -> EngineConfig:
    """This process's engine configuration (`role` overrides `MASSGEN_ROLE`)."""
    return EngineConfig(
        system_database_url=system_database_url(settings),
        executor_id=settings.executor_id,
        application_version=settings.app_version or package_version(),
        role=role or settings.role,
        worker_concurrency=settings.worker_concurrency,
        poll_interval=settings.engine_poll,
        heartbeat_interval=settings.heartbeat_interval,
        dead_after=settings.dead_after,
        limits=settings.limits(),
        limit_poll=settings.provider_poll,
    )
