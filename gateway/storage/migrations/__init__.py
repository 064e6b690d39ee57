"""The database's schema history, as Alembic revisions (gateway/storage/migrate.py runs them).

How to add a revision (a new column, table or index):

1. Change the table in gateway/storage/ (say, a `Column` on `ledger` in db.py).
2. Add `versions/vNNNN_what_it_does.py`, copied from the newest revision: `revision` is the next
   number ("0002"), `down_revision` the newest one's. `upgrade()` states the change with Alembic's
   `op` inside `op.batch_alter_table(...)` (SQLite cannot ALTER most things; batch mode copies the
   table where it must), with a server default for a NOT NULL column on a table that has rows.
3. Never edit a revision that has shipped: databases already carry it.
4. `pytest tests/gateway/storage/test_migrations.py` compares the schema the revisions build with
   the tables in the code, on SQLite and PostgreSQL, and prints what differs.
"""
