"""Writes that reach the disk before they return (fsync), for the few files outside the
store whose loss would change what recovery concludes: receipts, failpoint marks, known
hosts, restored database files."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_path(path: Path | str) -> None:
    """Flush a file, or a folder's entries (a rename or a new file in it), to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path | str, data: bytes, *, append: bool = False) -> None:
    """Write ``data`` to a private file (0600), replacing or after its content, and fsync."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
