"""The outbox records which executor saved each post (`owner`), so a restart resends only its own.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Rows saved before this revision have no owner; any process may send them (as before).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add the nullable `slack_outbox.owner` column (unless a pre-migration set-up already made it)."""
    if not op.get_context().as_sql:
        columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("slack_outbox")}
        if "owner" in columns:
            return
    op.add_column("slack_outbox", sa.Column("owner", sa.String(128), nullable=True))


def downgrade() -> None:
    """Drop `slack_outbox.owner`."""
    with op.batch_alter_table("slack_outbox") as batch:  # SQLite before 3.35 cannot drop a column
        batch.drop_column("owner")
