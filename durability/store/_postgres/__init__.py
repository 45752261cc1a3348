"""PostgreSQL's StoreTx, one module per table (assembled in durability/store/_postgres_rows.py).

The same operations as durability/store/_sqlite/, in PostgreSQL's dialect: ``%s``
placeholders, ``ON CONFLICT DO NOTHING`` for ``INSERT OR IGNORE``, ``RETURNING id`` for
``lastrowid``, ``IS NOT DISTINCT FROM`` for ``IS``, and the ``no`` identity columns for
SQLite's rowid. The hot-path operations fold check and write into one statement each
(data-modifying CTEs), so an intent or a result costs one round trip besides BEGIN and
COMMIT.
"""
