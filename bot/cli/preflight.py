"""Checks a command makes before it starts anything: each problem is one line a newcomer can act on.

A missing model file or a state folder that cannot be written otherwise surfaces deep inside a run
or a service's start-up, as a failed run (exit 2) or a traceback; found here it is a configuration
error (exit 1) naming the file or the folder.
"""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.settings import BotSettings
    from orchestrator import TeamConfig


def model_files_problem(team: TeamConfig) -> str | None:
    """Which local agents' model files are missing, in one line (None: every one is there)."""
    from orchestrator.llm.factory import missing_model_files

    missing = missing_model_files(team)
    return "; ".join(f"agent {agent}: {why}" for agent, why in missing.items()) or None


def state_folder_problem(settings: BotSettings) -> str | None:
    """Why `MASSGEN_STATE_DIR` cannot hold the bot's state, in one line (None: it can, or it is unset).

    A file is made and removed there: only a write shows whether the folder can be written (a mode
    bit says nothing to root, a read-only mount says nothing to `os.access` on some systems).
    """
    folder = settings.state_dir
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return f"the state folder {folder} (MASSGEN_STATE_DIR) cannot be written: {reason}"
    return None
