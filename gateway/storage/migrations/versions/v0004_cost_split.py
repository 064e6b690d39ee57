"""A request's cost by the deployment each of its calls went to (issue 24, reconciliation): a
cascade's tiers, a judge's grade, a billed call that failed. `costgate reconcile` counts each part
under its own provider's model instead of all of it under the served model's.

Revision ID: 0004
Revises: 0003

Rows written before this revision have none: their cost counts under the served model, as before.
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Only when missing: a database stamped away (restored from a dump without its
    # alembic_version) runs this again over a column it has.
    if "cost_split" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("ledger")}:
        with op.batch_alter_table("ledger") as batch:
            batch.add_column(sa.Column("cost_split", sa.Text(), nullable=True))
