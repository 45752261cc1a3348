"""The journal's tables: one object per table, its SQL written once for both engines.

Each table object is built with the transaction's dialect (durability/store/_sql.py) and
the tables it reaches (the calls table spills large results into the blobs table). Its
SQL uses ``?`` markers and the SQL SQLite and PostgreSQL both take; an engine subclasses
a table only for a statement that truly differs (durability/store/sqlite_tx.py,
durability/store/postgres_tx.py). Rows come back as records through the drivers' row
factories (durability/store/_shapes.py).
"""
