"""The baseline: the schema as release b66b511 left it, before there were migrations.

Revision ID: 0001
Revises:

Databases made by that release (or an earlier one) have no `alembic_version` table, so Alembic
runs this revision on them too: every table and index is created only where it is missing, and
`cascade_samples` gains the columns earlier releases added at start. A database b66b511 started
is left as it was; an older one is brought to the same schema.
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# cascade_samples grew these in place before migrations (each release added the missing ones)
LATER_SAMPLE_COLUMNS = (
    sa.Column("features", sa.Text(), nullable=True),
    sa.Column("feature_set", sa.Text(), nullable=True),
    sa.Column("texts", sa.Text(), nullable=True),
    sa.Column("weight", sa.Float(), nullable=True),
)


def upgrade() -> None:
    create_missing()
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("cascade_samples")}
    for column in LATER_SAMPLE_COLUMNS:
        if column.name not in present:
            op.add_column("cascade_samples", column)


def create_missing() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("team_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("key_prefix", sa.String(length=16), nullable=False),
        sa.Column("models", sa.Text(), nullable=True),
        sa.Column("plan", sa.String(length=20), nullable=False),
        sa.Column("tags", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key_hash"),
        if_not_exists=True,
    )
    op.create_index(op.f("ix_api_keys_team_id"), "api_keys", ["team_id"], unique=False, if_not_exists=True)
    op.create_table(
        "batch_results",
        sa.Column("batch_id", sa.String(length=64), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("custom_id", sa.String(length=512), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_pusd", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("batch_id", "line"),
        if_not_exists=True,
    )
    op.create_table(
        "batches",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("team_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("endpoint", sa.String(length=64), nullable=False),
        sa.Column("input_file_id", sa.String(length=64), nullable=False),
        sa.Column("completion_window", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=True),
        sa.Column("errors", sa.Text(), nullable=True),
        sa.Column("output_file_id", sa.String(length=64), nullable=True),
        sa.Column("error_file_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("in_progress_at", sa.Float(), nullable=True),
        sa.Column("finalizing_at", sa.Float(), nullable=True),
        sa.Column("completed_at", sa.Float(), nullable=True),
        sa.Column("failed_at", sa.Float(), nullable=True),
        sa.Column("expired_at", sa.Float(), nullable=True),
        sa.Column("cancelling_at", sa.Float(), nullable=True),
        sa.Column("cancelled_at", sa.Float(), nullable=True),
        sa.Column("lease_owner", sa.String(length=40), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        if_not_exists=True,
    )
    op.create_index("ix_batches_status", "batches", ["status"], unique=False, if_not_exists=True)
    op.create_index("ix_batches_team_created", "batches", ["team_id", "created_at"], unique=False, if_not_exists=True)
    op.create_table(
        "budgets",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("period", sa.String(length=8), nullable=False),
        sa.Column("amount_pusd", sa.BigInteger(), nullable=False),
        sa.Column("alert_at", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("scope", "subject", "period", name="uq_budget_subject_period"),
        if_not_exists=True,
    )
    op.create_table(
        "dashboard_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id_hash"),
        if_not_exists=True,
    )
    op.create_index(
        op.f("ix_dashboard_sessions_expires_at"), "dashboard_sessions", ["expires_at"], unique=False, if_not_exists=True
    )
    op.create_table(
        "files",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("team_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=True),
        sa.Column("filename", sa.String(length=500), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        if_not_exists=True,
    )
    op.create_index("ix_files_team_created", "files", ["team_id", "created_at"], unique=False, if_not_exists=True)
    op.create_table(
        "ledger",
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("team_id", sa.String(length=40), nullable=True),
        sa.Column("key_id", sa.String(length=40), nullable=True),
        sa.Column("user", sa.String(length=200), nullable=True),
        sa.Column("tags", sa.Text(), nullable=True),
        sa.Column("trace_id", sa.String(length=200), nullable=True),
        sa.Column("endpoint", sa.String(length=32), nullable=False),
        sa.Column("requested_model", sa.String(length=200), nullable=True),
        sa.Column("served_model", sa.String(length=200), nullable=True),
        sa.Column("provider", sa.String(length=32), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_pusd", sa.BigInteger(), nullable=False),
        sa.Column("saved_pusd", sa.BigInteger(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("cache_status", sa.String(length=16), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("request_id"),
        if_not_exists=True,
    )
    op.create_index("ix_ledger_created", "ledger", ["created_at"], unique=False, if_not_exists=True)
    op.create_index("ix_ledger_day", "ledger", ["day"], unique=False, if_not_exists=True)
    op.create_index("ix_ledger_key_day", "ledger", ["key_id", "day"], unique=False, if_not_exists=True)
    op.create_index(
        "ix_ledger_live",
        "ledger",
        [
            "created_at",
            "day",
            "team_id",
            "requested_model",
            "served_model",
            "cache_status",
            "status",
            "prompt_tokens",
            "completion_tokens",
            "cost_pusd",
            "saved_pusd",
        ],
        unique=False,
        if_not_exists=True,
    )
    op.create_index("ix_ledger_team_day", "ledger", ["team_id", "day"], unique=False, if_not_exists=True)
    op.create_index("ix_ledger_trace", "ledger", ["trace_id"], unique=False, if_not_exists=True)
    op.create_table(
        "ledger_daily",
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("team_id", sa.String(length=40), nullable=False),
        sa.Column("requested_model", sa.String(length=200), nullable=False),
        sa.Column("served_model", sa.String(length=200), nullable=False),
        sa.Column("cache_status", sa.String(length=16), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_pusd", sa.BigInteger(), nullable=False),
        sa.Column("saved_pusd", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("day", "team_id", "requested_model", "served_model", "cache_status"),
        if_not_exists=True,
    )
    op.create_table(
        "ledger_rollup",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("rolled_until", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
        if_not_exists=True,
    )
    op.create_table(
        "stored_responses",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("team_id", sa.String(length=40), nullable=False),
        sa.Column("previous_response_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        if_not_exists=True,
    )
    op.create_index("ix_stored_responses_expires", "stored_responses", ["expires_at"], unique=False, if_not_exists=True)
    op.create_index(
        "ix_stored_responses_team_created",
        "stored_responses",
        ["team_id", "created_at"],
        unique=False,
        if_not_exists=True,
    )
    op.create_table(
        "teams",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
        if_not_exists=True,
    )
    # ### end Alembic commands ###
    op.create_table(
        "feedback",
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("team_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=True),
        sa.Column("reported_by", sa.String(length=40), nullable=False),
        sa.Column("requested_model", sa.String(length=200), nullable=True),
        sa.Column("served_model", sa.String(length=200), nullable=True),
        sa.Column("cache_status", sa.String(length=16), nullable=False),
        sa.Column("verdict", sa.String(length=8), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("query", sa.Text(), nullable=True),
        sa.Column("stored", sa.Text(), nullable=True),
        sa.Column("requested_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("request_id"),
        if_not_exists=True,
    )
    op.create_index(
        "ix_feedback_model", "feedback", ["requested_model", "requested_at"], unique=False, if_not_exists=True
    )
    op.create_index("ix_feedback_team", "feedback", ["team_id", "requested_at"], unique=False, if_not_exists=True)
    # ### end Alembic commands ###
    op.create_table(
        "distill_texts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("cascade", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("team_id", sa.String(length=40), nullable=False),
        sa.Column("team_name", sa.String(length=200), nullable=False),
        sa.Column("served_model", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("messages", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        if_not_exists=True,
    )
    op.create_index("ix_distill_texts_cascade", "distill_texts", ["cascade", "id"], unique=False, if_not_exists=True)
    # ### end Alembic commands ###
    op.create_table(
        "cascade_samples",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("cascade", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("request_id", sa.String(length=40), nullable=True),
        sa.Column("confidences", sa.Text(), nullable=False),
        sa.Column("agrees", sa.Text(), nullable=False),
        sa.Column("features", sa.Text(), nullable=True),
        sa.Column("feature_set", sa.Text(), nullable=True),
        sa.Column("texts", sa.Text(), nullable=True),
        sa.Column("weight", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        if_not_exists=True,
    )
    op.create_index(
        "ix_cascade_samples_cascade", "cascade_samples", ["cascade", "id"], unique=False, if_not_exists=True
    )
    # ### end Alembic commands ###
