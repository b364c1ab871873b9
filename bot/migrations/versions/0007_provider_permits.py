"""Leased provider permits: the fleet-wide provider limits without a workflow per request.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create `provider_permits` unless the engine already made it."""
    offline = op.get_context().as_sql  # `db upgrade --sql`: DDL for a DBA, no database to look at
    if not offline and "provider_permits" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "provider_permits",
        sa.Column("provider", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("slot", sa.Integer(), primary_key=True),
        sa.Column("holder", sa.String(160), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=False),
        sa.Column("wanted_by", sa.String(160), nullable=True),
        sa.Column("wanted_until", sa.Float(), nullable=True),
    )
    op.create_index("ix_provider_permits_free", "provider_permits", ["provider", "kind", "lease_until"])


def downgrade() -> None:
    """Drop `provider_permits`."""
    op.drop_index("ix_provider_permits_free", table_name="provider_permits")
    op.drop_table("provider_permits")
