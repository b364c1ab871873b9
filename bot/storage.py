"""The bot's storage: every store on one database engine, its schema migrated first.

Its own module because three surfaces open it: the Slack bot (`bot.wiring.build_services`), the
terminal runner (`massgen-bot run`) and the approvals CLI, and all of them must keep runs and
approvals in the same SQL stores. Nothing here imports the Slack SDK.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from approvals import ApprovalService, SqlApprovalStore, SqlAuditLog, make_engine
from bot.migrations import ensure_schema
from bot.settings import BotSettings
from bot.slack.store import BotStore
from orchestrator import SqlRunStore

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine


@dataclass(frozen=True, slots=True)
class Storage:
    """Every store on one database engine: approvals, audit, runs, the bot's Slack coordinates."""

    engine: AsyncEngine
    store: BotStore
    run_store: SqlRunStore
    audit: SqlAuditLog
    approvals: ApprovalService

    async def close(self) -> None:
        """Release the database."""
        await self.engine.dispose()

    async def ping(self, *, within: float = 2.0) -> str | None:
        """None when the database takes a probe write within `within` seconds, else why not."""
        try:
            async with asyncio.timeout(within):
                await self.store.probe_write()
        except Exception as exc:  # any failure means not ready; the reason goes to /readyz
            return f"{type(exc).__name__}: {exc}"[:200]
        return None


async def open_storage(settings: BotSettings) -> Storage:
    """One engine for every table (the settings' database, SQLite under `MASSGEN_STATE_DIR` by default).

    The schema is migrated to head first, or (policy `check`) `bot.migrations.SchemaBehindError` says
    which command to run.
    """
    if settings.state_dir is not None:
        settings.state_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_database_url())
    try:
        await ensure_schema(engine, settings.upgrade_policy())
    except BaseException:
        await engine.dispose()
        raise
    store = BotStore(engine)
    audit = SqlAuditLog(engine)
    approvals = ApprovalService(SqlApprovalStore(engine), audit)
    return Storage(engine, store, SqlRunStore(engine), audit, approvals)


__all__ = ["Storage", "open_storage"]
