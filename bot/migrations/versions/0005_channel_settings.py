"""Channel settings (default repository, team, policy, approvers) and their audit trail.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create `channel_settings` and `channel_settings_audit`."""
    op.create_table(
        "channel_settings",
        sa.Column("channel", sa.String(32), primary_key=True),
        sa.Column("repository", sa.String(64), nullable=True),
        sa.Column("team", sa.String(64), nullable=True),
        sa.Column("policy", sa.String(32), nullable=True),
        sa.Column("approvers", sa.Text(), nullable=False),
        sa.Column("approver_group", sa.String(32), nullable=True),
        sa.Column("updated_by", sa.String(32), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "channel_settings_audit",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(32), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("field", sa.String(32), nullable=False),
        sa.Column("old", sa.Text(), nullable=True),
        sa.Column("new", sa.Text(), nullable=True),
    )
    op.create_index("ix_channel_settings_audit_channel", "channel_settings_audit", ["channel", "id"])


def downgrade() -> None:
    """Drop the channel settings and their audit trail."""
    op.drop_index("ix_channel_settings_audit_channel", table_name="channel_settings_audit")
    op.drop_table("channel_settings_audit")
    op.drop_table("channel_settings")
