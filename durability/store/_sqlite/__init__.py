"""SQLite's part of StoreTx (assembled in durability/store/_sqlite_rows.py): its dialect
(base.py) and its own statements for the hot path; the tables are durability/store/_tables/."""
