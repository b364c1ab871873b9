"""The tables the migrations keep: approvals, runs, Slack coordinates and outbox, engine, workspaces,
channel settings and runs' repositories."""

from __future__ import annotations

from sqlalchemy import MetaData

from approvals import approval_metadata
from bot.channel_settings import channel_metadata
from bot.engine import engine_metadata
from bot.runs import repository_metadata
from bot.slack import bot_metadata
from orchestrator import run_metadata, workspace_metadata


def target_metadata() -> list[MetaData]:
    """Every table of every store: what `db upgrade` to head must create, exactly."""
    return [
        approval_metadata,
        run_metadata,
        bot_metadata,
        engine_metadata,
        workspace_metadata,
        channel_metadata,
        repository_metadata,
    ]
