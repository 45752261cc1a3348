"""text_editor: read, write and patch text files (paths relative to the work folder)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from python.helpers.tool import Response, Tool

MAX_READ_LINES = 2000


class EditError(ValueError):
    """A bad request the model can fix; the message says how."""


def _line_no(args: dict[str, Any], key: str, default: int) -> int:
    value = args.get(key, default)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except (TypeError, ValueError) as e:
        raise EditError(f"'{key}' must be a line number, got {value!r}") from e


def read_lines(path: Path, start: int, end: int) -> str:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    total = len(lines)
    end = min(end if end > 0 else total, total, start + MAX_READ_LINES - 1)
    shown = [f"{n:>5}| {lines[n - 1]}" for n in range(max(start, 1), end + 1)]
    more = f"\n[lines {start}-{end} of {total}]" if total else "[empty file]"
    return "\n".join(shown) + more


def _edit_range(edit: dict[str, Any], total: int) -> tuple[int, int, str]:
    """(first line, last line, new text) of one edit; last = first - 1 inserts before first.

    Two shapes: ours ``{line_from, line_to, content}`` (``line_to`` defaults to
    ``line_from``) and upstream's ``{from, to, content}``, where ``{from: n}`` without
    ``to`` inserts before line n and ``{from, to}`` without content deletes."""
    if "line_from" in edit or "line_to" in edit:
        start = _line_no(edit, "line_from", 0)
        end = _line_no(edit, "line_to", start)
    else:
        start = _line_no(edit, "from", 0)
        end = _line_no(edit, "to", start - 1) if edit.get("to") not in (None, "") else start - 1
    content = edit.get("content", "")
    if start < 1 or end < start - 1 or end > total:
        raise EditError(f"line range {start}-{end} is outside the file (1-{total})")
    return start, end, "" if content is None else str(content)


def apply_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """Replace inclusive 1-based line ranges (see _edit_range); line numbers refer to the
    file before the patch and ranges must not overlap."""
    lines = text.splitlines(keepends=True)
    ranges = []
    for edit in edits:
        if not isinstance(edit, dict):
            raise EditError("each edit must be an object {from, to, content}")
        ranges.append(_edit_range(edit, len(lines)))
    ranges.sort(key=lambda r: (r[0], r[1]))  # stable: inserts at one line keep their order
    for (s1, e1, _), (s2, _, _) in itertools.pairwise(ranges):
        if s2 <= e1:
            raise EditError(f"edits overlap at lines {s1}-{e1} and {s2}")
    for start, end, content in reversed(ranges):
        new = content.splitlines(keepends=True)
        if new and not new[-1].endswith("\n"):
            new[-1] += "\n"
        if start - 1 > 0 and start - 1 == len(lines) and not lines[-1].endswith("\n"):
            lines[-1] += "\n"  # appending after a last line without a newline
        lines[start - 1 : end] = new
    return "".join(lines)


class TextEditor(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        method = self.method or str(self.args.get("method", "") or "read")
        raw = str(self.args.get("path", "")).strip()
        if not raw:
            return Response("text_editor needs a 'path'.", break_loop=False)
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = self.agent.config.workdir_path() / path
        try:
            if method == "read":
                text = await asyncio.to_thread(self._read, path)
            elif method == "write":
                text = await asyncio.to_thread(self._write, path, str(self.args.get("content", "")))
            elif method == "patch":
                text = await asyncio.to_thread(self._patch, path, self.args.get("edits"))
            else:
                text = f"Unknown method '{method}'. Use text_editor:read, :write or :patch."
        except EditError as e:
            text = f"text_editor:{method} refused: {e}"
        except OSError as e:
            text = f"text_editor:{method} failed on {path}: {e.strerror or e}"
        return Response(text, break_loop=False)

    def _read(self, path: Path) -> str:
        if not path.is_file():
            raise EditError(f"{path} is not a file")
        start = _line_no(self.args, "line_from", 1)
        end = _line_no(self.args, "line_to", 0)
        return f"{path}:\n" + read_lines(path, start, end)

    def _write(self, path: Path, content: str) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return f"Wrote {len(content.splitlines())} lines to {path}."

    def _patch(self, path: Path, edits: Any) -> str:
        if not isinstance(edits, list) or not edits:
            raise EditError("'edits' must be a non-empty list of {from, to, content}")
        if not path.is_file():
            raise EditError(f"{path} is not a file")
        new = apply_edits(path.read_text(encoding="utf-8"), edits)
        path.write_text(new, encoding="utf-8")
        return f"Patched {path} ({len(edits)} edits); it now has {len(new.splitlines())} lines."
