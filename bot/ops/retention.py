"""Retention: old runs' event logs, their leftover workspaces and delivered outbox rows are pruned.

A run's summary row (`runs`: task, outcome, winner, final answer, spend) stays, so history and the
Home tab still list it; its event log (`run_events`, the bulk: every delta and tool result) goes
once the run ended more than `MASSGEN_RETENTION_DAYS` ago. A run still running is never touched,
however old. The approval audit trail and the approval requests are always kept: the audit table
refuses DELETE anyway. Workspaces are removed when a run ends; what a crash left behind under
`MASSGEN_STATE_DIR/workspaces` goes once it is older than the cut-off and its run is not running.
Workspace snapshots (manifests) of runs that ended before the cut-off go too, and then every blob
no manifest references and no checkpoint used since the cut-off (an hour at least: a checkpoint
between finding a blob present and referencing it is never undercut).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import delete, select

from bot.slack import bot_metadata
from orchestrator import prune_unused_blobs, run_metadata, workspace_metadata

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)

DAY = 86_400.0
_BLOB_GRACE = 3600.0  # a blob unused for less than this is kept even when nothing references it
_SOURCE_SUFFIX = ".source"


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneReport:
    """What one sweep removed."""

    event_rows: int = 0
    outbox_rows: int = 0
    workspaces: tuple[str, ...] = ()
    snapshots: int = 0  # workspace manifests (one per run and workspace) of ended runs
    blobs: int = 0  # stored file contents nothing referenced any more


async def prune(
    engine: AsyncEngine, *, older_than_days: float, workspaces: Path | None, now: float | None = None
) -> PruneReport:
    """One sweep: delete what ended before `now - older_than_days`; returns what went."""
    clock = time.time() if now is None else now
    cutoff = clock - older_than_days * DAY
    spaces = workspace_metadata.tables["workspace_spaces"]
    files = workspace_metadata.tables["workspace_entries"]
    runs = run_metadata.tables["runs"]
    events = run_metadata.tables["run_events"]
    outbox = bot_metadata.tables["slack_outbox"]
    ended = select(runs.c.run_id).where(runs.c.status != "running", runs.c.ended_at < cutoff)
    async with engine.begin() as conn:
        event_rows = (await conn.execute(delete(events).where(events.c.run_id.in_(ended)))).rowcount
        sent = outbox.c.status.in_(("sent", "failed")) & (outbox.c.created_at < cutoff)
        outbox_rows = (await conn.execute(delete(outbox).where(sent))).rowcount
        await conn.execute(delete(files).where(files.c.run_id.in_(ended)))
        snapshots = (await conn.execute(delete(spaces).where(spaces.c.run_id.in_(ended)))).rowcount
        blobs = await prune_unused_blobs(conn, unused_since=min(cutoff, clock - _BLOB_GRACE))
        running = set((await conn.execute(select(runs.c.run_id).where(runs.c.status == "running"))).scalars())
    removed: tuple[str, ...] = ()
    if workspaces is not None:
        removed = await asyncio.to_thread(_prune_workspaces, workspaces, cutoff, running)
    return PruneReport(
        event_rows=event_rows or 0,
        outbox_rows=outbox_rows or 0,
        workspaces=removed,
        snapshots=snapshots or 0,
        blobs=blobs,
    )


def _prune_workspaces(root: Path, cutoff: float, running: set[str]) -> tuple[str, ...]:
    if not root.is_dir():
        return ()
    removed: list[str] = []
    for entry in sorted(root.iterdir()):
        run_id = entry.name.removesuffix(_SOURCE_SUFFIX)
        if not entry.is_dir() or entry.is_symlink() or run_id in running:
            continue
        if entry.stat().st_mtime >= cutoff:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    return tuple(removed)


async def retention_loop(
    engine: AsyncEngine,
    *,
    older_than_days: float,
    workspaces: Path | None,
    interval: float,
    stop: asyncio.Event,
    clock: Callable[[], float] = time.time,
) -> None:
    """Sweep now, then every `interval` seconds until `stop` is set (a failed sweep is logged, retried)."""
    while not stop.is_set():
        try:
            report = await prune(engine, older_than_days=older_than_days, workspaces=workspaces, now=clock())
        except Exception:
            log.exception("retention sweep failed; trying again in %.0fs", interval)
        else:
            if report.event_rows or report.outbox_rows or report.workspaces or report.blobs:
                log.info(
                    "retention: pruned %d event rows, %d outbox rows, %d workspaces, %d snapshot blobs",
                    report.event_rows,
                    report.outbox_rows,
                    len(report.workspaces),
                    report.blobs,
                )
        try:  # the schedule itself: wake at the next sweep, or at once when stopped
            await asyncio.wait_for(stop.wait(), timeout=interval)
        except TimeoutError:
            continue


__all__ = ["DAY", "PruneReport", "prune", "retention_loop"]
