"""POST /api/rename_work_dir_file: give a file, link or folder of the work folder a new name
in the same folder (upstream's endpoint name; ``oldPath``/``newName`` as upstream's UI sends
them, ``path``/``new_name`` too)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from python.api._work_dir import WorkPath, listing, not_found, resolve, work_root
from python.server.api import ApiError, ApiHandler, bad_request, get_str


def _first(input: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = get_str(input, key)
        if value.strip():
            return value
    raise bad_request(f"'{keys[0]}' is required", field=keys[0])


def _rename(target: WorkPath, new: WorkPath) -> dict[str, Any]:
    if not target.lexical.exists() and not target.lexical.is_symlink():
        raise not_found(target.rel)
    if new.lexical.exists() or new.lexical.is_symlink():
        raise ApiError("file_exists", f"'{new.rel}' already exists; nothing was renamed.")
    os.rename(target.lexical, new.lexical)  # a link is renamed itself, never its target
    parent = resolve(target.root, str(target.lexical.parent))
    return {"renamed": target.rel, "new_path": new.rel, **listing(parent)}


class RenameWorkDirFile(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        action = get_str(input, "action") or "rename"
        if action != "rename":
            raise bad_request("'action' must be 'rename'", field="action")
        root = await work_root(self.runtime, input)
        target = resolve(root, _first(input, "path", "oldPath"), link_itself=True)
        if not target.rel:
            raise bad_request("the work folder itself cannot be renamed", field="path")
        name = _first(input, "newName", "new_name").strip()
        if name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
            raise bad_request("'newName' must be one file or folder name", field="newName")
        folder = target.lexical.parent
        sibling = name if folder == root else f"{folder.relative_to(root).as_posix()}/{name}"
        new = resolve(root, sibling, link_itself=True)
        return await asyncio.to_thread(_rename, target, new)
