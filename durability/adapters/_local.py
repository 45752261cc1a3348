"""Small reads of this machine's state shared by the local adapters (shell, pty) and the
terminal helper: a bounded JSON file, whether a pid still runs."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any


def read_json_object(path: Path, max_bytes: int) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it is missing, unreadable, larger than
    ``max_bytes``, not UTF-8, not JSON or not an object."""
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
        if len(raw) > max_bytes:
            return None
        value = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def pid_alive(pid: Any) -> bool:
    """True while ``pid`` runs (a zombie does not). Informational only: a pid can be
    reused, so this never proves anything."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):  # Linux: a zombie is not running
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True
