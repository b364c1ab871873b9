"""Each Slack run's repository binding (mirror, base commit, branch), for its resumes and follow-ups.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create `run_repositories`."""
    op.create_table(
        "run_repositories",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("binding", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    """Drop `run_repositories`."""
    op.drop_table("run_repositories")
