"""Baseline: every table as `create_schema` made it before migrations (approvals, runs, Slack, outbox).

Revision ID: 0001
Revises:
Create Date: 2026-12-01

A database made by `create_schema` (any earlier version) is brought to this schema by those same
idempotent functions and then stamped `0001` (`bot.migrations.upgrade`), so it never runs this file.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

# The audit trail is append-only in the database too (same statements as `approvals.sql`, frozen here).
_APPEND_ONLY = {
    "sqlite": [
        f"CREATE TRIGGER approval_audit_no_{op_name.lower()} BEFORE {op_name} ON approval_audit "
        "BEGIN SELECT RAISE(ABORT, 'approval_audit is append-only'); END"
        for op_name in ("UPDATE", "DELETE")
    ],
    "postgresql": [
        "CREATE OR REPLACE FUNCTION approval_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'approval_audit is append-only'; END $$",
        "CREATE TRIGGER approval_audit_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON approval_audit "
        "FOR EACH STATEMENT EXECUTE FUNCTION approval_audit_append_only()",
    ],
}
_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the tables, their indexes and the audit triggers."""
    _approvals()
    _runs()
    _slack()
    for statement in _APPEND_ONLY.get(op.get_context().dialect.name, []):
        op.execute(statement)


def _approvals() -> None:
    op.create_table(
        "approval_always_rules",
        sa.Column("rule", sa.String(2000), primary_key=True),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("decided_by", sa.String(200), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
    )
    op.create_table(
        "approval_audit",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("at", _UTC, nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("agent_id", sa.String(200), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("layer", sa.String(16)),
        sa.Column("risk", sa.String(16)),
        sa.Column("reason", sa.Text()),
        sa.Column("request_id", sa.String(64)),
        sa.Column("scope", sa.String(16)),
    )
    op.create_index("ix_approval_audit_run", "approval_audit", ["run_id", "seq"])
    op.create_table(
        "approval_requests",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("agent_id", sa.String(200), nullable=False),
        sa.Column("requester_id", sa.String(200)),
        sa.Column("action_kind", sa.String(16), nullable=False),
        sa.Column("action_target", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(128), nullable=False),
        sa.Column("risk", sa.String(16), nullable=False),
        sa.Column("layer", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("rule", sa.Text()),
        sa.Column("scopes", sa.String(32), nullable=False),
        sa.Column("approvers", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.Column("nonce", sa.String(128), nullable=False),
        sa.Column("decided_by", sa.String(200)),
        sa.Column("decided_at", _UTC),
        sa.Column("decision_scope", sa.String(16)),
        sa.Column("decision_reason", sa.Text()),
        sa.Column("approvals_so_far", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=False),
        sa.Column("reminded_at", _UTC),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("conversation", sa.Text()),
    )
    op.create_index("ix_approval_requests_run", "approval_requests", ["run_id"])
    op.create_index("ix_approval_requests_status_expires", "approval_requests", ["status", "expires_at"])


def _runs() -> None:
    op.create_table(
        "run_events",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("requester", sa.String(255)),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float()),
        sa.Column("winner", sa.String(64)),
        sa.Column("salvage", sa.String(64)),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("team", sa.String(128)),
        sa.Column("final_answer", sa.Text()),
        sa.Column("conversation_surface", sa.String(32)),
        sa.Column("conversation_channel", sa.String(255)),
        sa.Column("conversation_thread", sa.String(255)),
    )
    op.create_index("ix_runs_channel", "runs", ["conversation_channel", "started_at"])
    op.create_index("ix_runs_requester", "runs", ["requester", "started_at"])
    op.create_index("ix_runs_started_at", "runs", ["started_at"])


def _slack() -> None:
    op.create_table(
        "bot_approval_copies",
        sa.Column("request_id", sa.String(128), primary_key=True),
        sa.Column("channel", sa.String(32), primary_key=True),
        sa.Column("ts", sa.String(32), nullable=False),
    )
    op.create_table(
        "bot_approval_messages",
        sa.Column("request_id", sa.String(128), primary_key=True),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
    )
    op.create_table(
        "slack_outbox",
        sa.Column("id", sa.String(96), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("kwargs", sa.Text(), nullable=False),
        sa.Column("root_id", sa.String(64)),
        sa.Column("thread_ts", sa.String(32)),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.Float(), nullable=False),
        sa.Column("last_error", sa.Text()),
        sa.Column("ts", sa.String(32)),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_slack_outbox_status", "slack_outbox", ["status", "seq"])
    op.create_table(
        "slack_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("root_ts", sa.String(32)),
        sa.Column("thread_ts", sa.String(32)),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_slack_runs_thread", "slack_runs", ["channel", "thread_ts"])


def downgrade() -> None:
    """Drop everything `upgrade` made (the audit trail included: only for a scratch database)."""
    for table in (
        "slack_runs",
        "slack_outbox",
        "bot_approval_messages",
        "bot_approval_copies",
        "runs",
        "run_events",
        "approval_requests",
        "approval_audit",
        "approval_always_rules",
    ):
        op.drop_table(table)
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS approval_audit_append_only()")
