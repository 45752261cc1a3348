"""The SQLite journal's integrity check, started before the journal opens (issue #24).

The store runs ``PRAGMA quick_check`` when it opens a journal, and nothing is served before
its verdict (DESIGN.md). The check reads every page of the file: ~0.9 s for a journal of
1,000 chats of 50 steps (185 MB). A server starts it in a thread of its own when its
process starts (``begin``, run_ui.py), on a read-only connection of its own, so that it
runs while the process imports its modules (SQLite releases the GIL while it reads). The
store that opens the same file later waits for that verdict (``passed``) instead of
checking again.

Only a check that passed on the very file being opened stands in for the store's own:
any other outcome (problems found, an error, a file replaced or created since, no check
begun) makes the store check the file itself as before, so a damaged journal is refused
exactly as it always was (``corrupt_database``), only after checking it twice.

Standard library only: importing this module does not load the journal.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

#: The most of the file the check maps into memory (SQLite caps it at its own limit); the
#: mapping goes when the check's connection closes.
MMAP_BYTES = 1 << 31
_LOCK = threading.Lock()
_BEGUN: dict[str, EarlyCheck] = {}


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class EarlyCheck:
    """One ``PRAGMA quick_check`` of an existing file, in a daemon thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.identity = _identity(path)
        self.rows: list[str] | None = None  # the pragma's rows; None: it did not answer
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="journal-check", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            uri = self.path.resolve().as_uri() + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=10.0, isolation_level=None)
            try:
                # the pages read through a memory map, not one read() call each: the check
                # costs less than half the CPU (0.19 s against 0.42 s for 185 MB)
                conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
                self.rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
            finally:
                conn.close()
        except Exception:  # the store checks the file itself and reports what it finds
            self.rows = None
        finally:
            self.done.set()

    def passed(self) -> bool:
        """Wait for the verdict: True only when the check found nothing wrong in the file
        that is still at ``path``."""
        self.done.wait()
        return self.rows == ["ok"] and self.identity == _identity(self.path)


def _key(path: str | os.PathLike[str]) -> str:
    return str(Path(path).resolve())


def begin(path: str | os.PathLike[str]) -> EarlyCheck | None:
    """Start checking the journal at ``path`` now (None when there is no such file yet: a
    new journal is checked by the store, at no cost)."""
    file = Path(path)
    if not file.is_file():
        return None
    check = EarlyCheck(file)
    if check.identity is None:
        return None
    with _LOCK:
        _BEGUN[_key(file)] = check
    check.start()
    return check


def passed(path: str | os.PathLike[str]) -> bool:
    """Did a check begun for ``path`` pass (waiting for it)? Each check answers once; False
    when none was begun, or it did not pass: the caller checks the file itself."""
    with _LOCK:
        check = _BEGUN.pop(_key(path), None)
    return check is not None and check.passed()
