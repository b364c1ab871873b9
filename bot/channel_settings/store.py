"""Channel settings in the database, and their audit trail: who changed what, old -> new.

A save writes the new settings and one audit row per changed field in one transaction, so the
trail can never miss a change that took effect (or record one that did not).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table, Text, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.channel_settings.defaults import ChannelDefaults

channel_metadata = MetaData()

channel_settings = Table(
    "channel_settings",
    channel_metadata,
    Column("channel", String(32), primary_key=True),
    Column("repository", String(64)),
    Column("team", String(64)),
    Column("policy", String(32)),
    Column("approvers", Text, nullable=False),  # JSON list of user ids
    Column("approver_group", String(32)),
    Column("updated_by", String(32), nullable=False),
    Column("updated_at", Float, nullable=False),
)

channel_settings_audit = Table(
    "channel_settings_audit",
    channel_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("channel", String(32), nullable=False),
    Column("actor", String(32), nullable=False),
    Column("at", Float, nullable=False),
    Column("field", String(32), nullable=False),
    Column("old", Text),
    Column("new", Text),
    Index("ix_channel_settings_audit_channel", "channel", "id"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One audit entry: `actor` changed `field` of `channel` from `old` to `new` at `at`."""

    channel: str
    actor: str
    at: float
    field: str
    old: str | None
    new: str | None


class ChannelSettingsStore:
    """SQL access to `channel_settings` and `channel_settings_audit` (SQLite or PostgreSQL)."""

    def __init__(self, engine: AsyncEngine, *, clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self._clock = clock

    async def create_schema(self) -> None:
        """Create the tables if missing (tests on a bare engine; deployments migrate)."""
        async with self._engine.begin() as conn:
            await conn.run_sync(channel_metadata.create_all)

    async def get(self, channel: str) -> ChannelDefaults | None:
        """The channel's saved defaults, or None when it has none."""
        async with self._engine.connect() as conn:
            return await _read(conn, channel)

    async def save(self, channel: str, new: ChannelDefaults, *, actor: str) -> list[Change]:
        """Replace the channel's settings; each changed field is audited in the same transaction."""
        now = self._clock()
        row = {
            "channel": channel,
            "repository": new.repository,
            "team": new.team,
            "policy": new.policy,
            "approvers": json.dumps(list(new.approvers)),
            "approver_group": new.approver_group,
            "updated_by": actor,
            "updated_at": now,
        }
        async with self._engine.begin() as conn:
            # Read under a row lock (PostgreSQL) so two saves at once audit against what each replaced.
            before = (await _read(conn, channel, lock=True) or ChannelDefaults()).fields()
            after = new.fields()
            changes = [
                Change(channel=channel, actor=actor, at=now, field=name, old=before[name], new=after[name])
                for name in after
                if before[name] != after[name]
            ]
            if not changes:
                return []
            await conn.execute(delete(channel_settings).where(channel_settings.c.channel == channel))
            await conn.execute(insert(channel_settings).values(**row))
            await conn.execute(
                insert(channel_settings_audit),
                [
                    {
                        "channel": c.channel,
                        "actor": c.actor,
                        "at": c.at,
                        "field": c.field,
                        "old": c.old,
                        "new": c.new,
                    }
                    for c in changes
                ],
            )
        return changes

    async def audit(self, channel: str) -> list[Change]:
        """The channel's audit trail, oldest first."""
        query = (
            select(channel_settings_audit)
            .where(channel_settings_audit.c.channel == channel)
            .order_by(channel_settings_audit.c.id)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [
            Change(
                channel=r["channel"],
                actor=r["actor"],
                at=r["at"],
                field=r["field"],
                old=r["old"],
                new=r["new"],
            )
            for r in rows
        ]


async def _read(conn: AsyncConnection, channel: str, *, lock: bool = False) -> ChannelDefaults | None:
    query = select(channel_settings).where(channel_settings.c.channel == channel)
    row = (await conn.execute(query.with_for_update() if lock else query)).mappings().first()
    if row is None:
        return None
    return ChannelDefaults(
        repository=row["repository"],
        team=row["team"],
        policy=row["policy"],
        approvers=tuple(json.loads(row["approvers"])),
        approver_group=row["approver_group"],
    )
