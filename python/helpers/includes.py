"""Long tool results kept as files, and ``§§include(<path>)`` in tool arguments.

A tool result of LONG_RESULT characters or more is also written to
``usr/chats/<chat id>/messages/<digest>.txt``; the history names the file, so the model can
hand the whole result on to a tool as ``§§include(<that path>)`` instead of copying it.
The file name is the text's digest (upstream numbers the files): a replayed run writes the
same file under the same name and its prompts stay the same.

``§§include(<absolute path>)`` in a tool's arguments is replaced by the file's text just
before the tool runs (after the journal recorded the arguments as the model wrote them).
A path that is not absolute, not readable, not UTF-8 or larger than MAX_INCLUDE stays as
written.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from python.helpers import files

LONG_RESULT = 500  # characters, as upstream
MAX_INCLUDE = 5 * 1024 * 1024  # bytes one include may insert
INCLUDE = re.compile(r"§§include\(([^()\n]+)\)")


def chat_folder(context_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", context_id)[:200] or "_"
    return files.usr_dir() / "chats" / safe


def save_long_result(context_id: str, text: str) -> Path | None:
    """The file holding ``text`` when it is long (written once), else None."""
    if len(text) < LONG_RESULT:
        return None
    name = hashlib.sha256(text.encode("utf-8")).hexdigest()[:24] + ".txt"
    path = chat_folder(context_id) / "messages" / name
    if not path.is_file():
        files.write_atomic(path, text)
    return path


def _read(raw: str) -> str | None:
    path = Path(raw.strip())
    if not path.is_absolute():
        return None
    try:
        if path.stat().st_size > MAX_INCLUDE:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def expand(value: Any) -> Any:
    """``value`` (text, or lists and dicts of it) with every readable include replaced."""
    if isinstance(value, str):
        if "§§include(" not in value:
            return value

        def one(match: re.Match[str]) -> str:
            text = _read(match.group(1))
            return match.group(0) if text is None else text

        return INCLUDE.sub(one, value)
    if isinstance(value, list):
        return [expand(item) for item in value]
    if isinstance(value, dict):
        return {key: expand(item) for key, item in value.items()}
    return value
