"""Workspace snapshots: content-addressed blobs and per-run manifests, so a taken-over run keeps its files.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create `workspace_blobs`, `workspace_spaces` and `workspace_entries`."""
    op.create_table(
        "workspace_blobs",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("used_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "workspace_spaces",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("space", sa.String(80), primary_key=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "workspace_entries",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("space", sa.String(80), primary_key=True),
        sa.Column("path", sa.String(1024), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("mode", sa.Integer(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=True),
        sa.Column("target", sa.Text(), nullable=True),
    )
    op.create_index("ix_workspace_entries_digest", "workspace_entries", ["digest"])


def downgrade() -> None:
    """Drop the snapshot tables (stored workspaces are lost; live runs keep their local copies)."""
    op.drop_index("ix_workspace_entries_digest", table_name="workspace_entries")
    op.drop_table("workspace_entries")
    op.drop_table("workspace_spaces")
    op.drop_table("workspace_blobs")
