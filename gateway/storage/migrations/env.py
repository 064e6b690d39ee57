"""Alembic's entry point: runs the revisions on the connection gateway/storage/migrate.py hands
it, inside the transaction (and lock) that module holds. There is no offline (SQL script) mode."""

from alembic import context

context.configure(
    connection=context.config.attributes["connection"],
    render_as_batch=True,  # SQLite alters a table by copying it: revisions use batch_alter_table
)
with context.begin_transaction():
    context.run_migrations()
