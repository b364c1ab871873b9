"""The durable engine's tables: controls (Cancel / Finish now for a run anywhere) and heartbeats.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

Before this revision the engine made them itself at launch (`EngineTables.create_schema`, which
stays idempotent): a table that already exists is left as it is.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create `engine_controls` and `engine_heartbeats` unless the engine already made them."""
    offline = op.get_context().as_sql  # `db upgrade --sql`: DDL for a DBA, no database to look at
    existing = set() if offline else set(sa.inspect(op.get_bind()).get_table_names())
    if "engine_controls" not in existing:
        op.create_table(
            "engine_controls",
            sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
            sa.Column("run_id", sa.String(128), nullable=False),
            sa.Column("action", sa.String(16), nullable=False),
            sa.Column("by_user", sa.String(128), nullable=True),
            sa.Column("at", sa.Float(), nullable=False),
            sa.Column("done", sa.Boolean(), nullable=False),
        )
        op.create_index("ix_engine_controls_run_id", "engine_controls", ["run_id"])
    if "engine_heartbeats" not in existing:
        op.create_table(
            "engine_heartbeats",
            sa.Column("executor_id", sa.String(128), primary_key=True),
            sa.Column("role", sa.String(16), nullable=False),
            sa.Column("application_version", sa.String(64), nullable=False),
            sa.Column("beat_at", sa.Float(), nullable=False),
        )


def downgrade() -> None:
    """Drop the engine's tables."""
    op.drop_index("ix_engine_controls_run_id", table_name="engine_controls")
    op.drop_table("engine_controls")
    op.drop_table("engine_heartbeats")
