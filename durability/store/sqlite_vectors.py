"""sqlite-vec in the journal's SQLite connections: vector functions for memory search.

Every connection the store opens (its group-commit writer and each reader) loads the
extension, so a search runs wherever a transaction runs. A missing or unloadable extension
never stops the journal: the store reports ``memory_search_backend = "unavailable"`` with
the reason, and memory search raises ``memory_backend_unavailable`` saying what to install.
"""

from __future__ import annotations

import sqlite3


def load_vector_extension(conn: sqlite3.Connection) -> str:
    """Load sqlite-vec into ``conn``; the problem when it cannot be (empty when loaded)."""
    try:
        import sqlite_vec
    except ImportError:
        return "the sqlite-vec package is not installed (pip install -r requirements.txt)"
    try:
        conn.enable_load_extension(True)
    except (AttributeError, sqlite3.Error) as exc:
        return f"this Python's sqlite3 cannot load extensions ({type(exc).__name__}: {exc})"
    try:
        sqlite_vec.load(conn)
        conn.execute("SELECT vec_version()").fetchone()
    except (sqlite3.Error, OSError, AttributeError) as exc:
        return f"sqlite-vec could not be loaded: {type(exc).__name__}: {exc}"
    finally:
        conn.enable_load_extension(False)
    return ""
