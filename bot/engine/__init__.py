"""Runs on DBOS: one durable workflow per run, queues for workers, recovery, wake-ups, roles.

This room is the only place that imports DBOS (an import of ~0.5 s: `massgen-bot run` never pays it).
"""

from bot.engine.config import EngineConfig, Role, engine_config, package_version, system_database_url
from bot.engine.engine import RUNS_QUEUE, Engine
from bot.engine.tables import Action, Control
from bot.engine.workflow import PARKED, WAKE, RunExecutor

__all__ = [
    "PARKED",
    "RUNS_QUEUE",
    "WAKE",
    "Action",
    "Control",
    "Engine",
    "EngineConfig",
    "Role",
    "RunExecutor",
    "engine_config",
    "package_version",
    "system_database_url",
]
