"""Where a usr folder keeps the journal's files (one definition for the server, the CLI,
the tests and the docs). The engine itself opens whatever path it is given."""

from __future__ import annotations

from pathlib import Path

#: The folder below usr/ that holds the journal, the shell receipts and the failpoint marks.
STATE_FOLDER = "durability"
JOURNAL_FILE = "journal.sqlite"
RECEIPTS_FOLDER = "receipts"


def state_dir(usr: Path) -> Path:
    """usr/durability: the journal's folder (failpoint marks live there too)."""
    return Path(usr) / STATE_FOLDER


def journal_path(usr: Path) -> Path:
    """usr/durability/journal.sqlite: the SQLite journal of a server."""
    return state_dir(usr) / JOURNAL_FILE


def receipts_dir(usr: Path) -> Path:
    """usr/durability/receipts: the shell receipts (docs/receipts.md)."""
    return state_dir(usr) / RECEIPTS_FOLDER
