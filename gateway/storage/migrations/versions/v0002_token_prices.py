"""Every token at its own price (issue 26): the ledger's prompt-cache writes, the service tier the
provider billed at, and what its prompt cache and its batch/flex tiers saved.

Revision ID: 0002
Revises: 0001

Rows written before this revision get the defaults: no cache writes (they were charged as plain
input then), the standard tier, nothing saved by the provider.
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COLUMNS = (
    sa.Column("cache_write_tokens", sa.Integer(), server_default="0", nullable=False),
    sa.Column("cache_write_1h_tokens", sa.Integer(), server_default="0", nullable=False),
    sa.Column("tier", sa.String(length=16), server_default="standard", nullable=False),
    sa.Column("provider_cache_saved_pusd", sa.BigInteger(), server_default="0", nullable=False),
    sa.Column("provider_tier_saved_pusd", sa.BigInteger(), server_default="0", nullable=False),
)


def upgrade() -> None:
    # Only the missing ones: a database stamped away (restored from a dump without its
    # alembic_version) runs this again over columns it has.
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("ledger")}
    with op.batch_alter_table("ledger") as batch:
        for column in COLUMNS:
            if column.name not in present:
                batch.add_column(column)
