"""Runs on DBOS: one durable workflow per run, queues for workers, recovery, wake-ups, roles.

This room is the only place that imports DBOS. Importing it costs ~0.5 s, so the names that need
it load on first use (PEP 562): the composition root imports them in a thread while the model
SDKs warm up, and `massgen-bot run` never pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from approvals import lazy_exports
from bot.engine.config import (
    PARKED,
    SUSPEND_RETRY,
    SUSPENDED,
    EngineConfig,
    Role,
    engine_config,
    package_version,
    system_database_url,
)
from bot.engine.tables import Action, Control
from bot.engine.tables import metadata as engine_metadata
from bot.engine.wakes import OutsideWaker, wake_on_decisions, wake_settled

if TYPE_CHECKING:
    from bot.engine.engine import RUNS_QUEUE, Engine
    from bot.engine.workflow import WAKE, RunExecutor

_LAZY = {
    "Engine": "bot.engine.engine",
    "RUNS_QUEUE": "bot.engine.engine",
    "RunExecutor": "bot.engine.workflow",
    "WAKE": "bot.engine.workflow",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "PARKED",
    "RUNS_QUEUE",
    "SUSPENDED",
    "SUSPEND_RETRY",
    "WAKE",
    "Action",
    "Control",
    "Engine",
    "EngineConfig",
    "OutsideWaker",
    "Role",
    "RunExecutor",
    "engine_config",
    "engine_metadata",
    "package_version",
    "system_database_url",
    "wake_on_decisions",
    "wake_settled",
]
