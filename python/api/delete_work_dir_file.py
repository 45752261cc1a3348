"""POST /api/delete_work_dir_file: remove a file, a link or a folder (with its contents)."""

from __future__ import annotations

import asyncio
import shutil
from typing import Any

from python.api._work_dir import WorkPath, listing, not_found, require_path, resolve, work_root
from python.server.api import ApiHandler, bad_request


def _delete(target: WorkPath) -> None:
    if target.real.is_symlink():
        target.real.unlink()  # the link itself, never what it points to
    elif target.real.is_dir():
        shutil.rmtree(target.real)  # rmtree removes links inside, it does not follow them
    elif target.real.exists():
        target.real.unlink()
    else:
        raise not_found(target.rel)


class DeleteWorkDirFile(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        root = await work_root(self.runtime, input)
        target = resolve(root, require_path(input), link_itself=True)
        if not target.rel:
            raise bad_request("the work folder itself cannot be deleted", field="path")
        await asyncio.to_thread(_delete, target)
        parent = resolve(root, str(target.lexical.parent))
        return {"deleted": target.rel, **await asyncio.to_thread(listing, parent)}
