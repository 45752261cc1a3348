"""PostgreSQL's part of StoreTx (assembled in durability/store/_postgres_rows.py): its
dialect (base.py), its hot path for calls, and the claims of shared workers.

The tables themselves are durability/store/_tables/, written once for both engines. The
dialect differs from SQLite's in: ``%s`` placeholders, ``RETURNING id`` for ``lastrowid``,
``= ANY(%s)`` for ``IN (...)``, the ``no`` identity columns for SQLite's rowid, and row
locks (``FOR NO KEY UPDATE``) on reads that decide writes. The hot-path operations fold
check and write into one statement each (data-modifying CTEs), so an intent or a result
costs one round trip besides BEGIN and COMMIT.
"""
