"""Batches at the provider (issue 26): the provider batch ids costgate submitted a caller's
lines in, so polling resumes after a restart without submitting them again.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "provider_batches",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("batch_id", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("custom_ids", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        if_not_exists=True,
    )
    op.create_index(
        "ix_provider_batches_batch", "provider_batches", ["batch_id", "model"], unique=False, if_not_exists=True
    )
