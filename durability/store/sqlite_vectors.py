"""sqlite-vec in the journal's SQLite connections: vector functions for memory search.

Every connection the store opens (its group-commit writer and each reader) loads the
extension, so a search runs wherever a transaction runs. A missing or unloadable extension
never stops the journal: the store reports ``memory_search_backend = "unavailable"`` with
the reason, and memory search raises ``memory_backend_unavailable`` saying what to install.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import sys
from collections.abc import Callable

#: The loadable library's name in the sqlite-vec package's folder (``sqlite_vec.load``).
LIBRARY = "vec0"


def _library() -> str | None:
    """Where the installed sqlite-vec package keeps its loadable extension (None: not
    installed), found without importing the package: its ``__init__`` imports numpy, for a
    helper the journal does not use, ~0.05 s a server would spend before it serves."""
    try:
        spec = importlib.util.find_spec("sqlite_vec")
    except (ImportError, ValueError):
        return None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    return os.path.normpath(os.path.join(folders[0], LIBRARY)) if folders else None


def _loader() -> Callable[[sqlite3.Connection], None] | None:
    """What loads the extension: the package's own ``load`` once it is imported, else the
    library from its folder; None when the package is not installed."""
    if "sqlite_vec" in sys.modules:
        module = sys.modules["sqlite_vec"]
        return None if module is None else module.load
    path = _library()
    return None if path is None else (lambda conn: conn.load_extension(path))


def load_vector_extension(conn: sqlite3.Connection) -> str:
    """Load sqlite-vec into ``conn``; the problem when it cannot be (empty when loaded)."""
    load = _loader()
    if load is None:
        return "the sqlite-vec package is not installed (pip install -r requirements.txt)"
    try:
        conn.enable_load_extension(True)
    except (AttributeError, sqlite3.Error) as exc:
        return f"this Python's sqlite3 cannot load extensions ({type(exc).__name__}: {exc})"
    try:
        load(conn)
        conn.execute("SELECT vec_version()").fetchone()
    except (sqlite3.Error, OSError, AttributeError) as exc:
        return f"sqlite-vec could not be loaded: {type(exc).__name__}: {exc}"
    finally:
        conn.enable_load_extension(False)
    return ""
