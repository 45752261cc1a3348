"""SQLite's StoreTx, one module per table (assembled in durability/store/_sqlite_rows.py)."""
