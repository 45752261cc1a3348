"""Shared pieces of the work-folder endpoints: the chat's folder and paths kept inside it.

A path names a file or folder relative to the work folder (``AgentConfig.workdir_path()``;
usr/workdir by default). Whatever its spelling, a path is accepted only when its fully
resolved form (``..`` folded, symbolic links followed) is the folder itself or lies inside
it: ``..`` that climbs out, an absolute path elsewhere and a link that points outside are
all refused with ``path_outside_workdir``.
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile

from python.api._chat import context_id_of
from python.server.api import ApiError, bad_request, get_str
from python.server.runtime import Runtime

MAX_UPLOAD_BYTES = 100 * 1024 * 1024  # per file
MAX_PATH_BYTES = 4096  # PATH_MAX on Linux
MAX_NAME_BYTES = 255  # NAME_MAX: one file or folder name
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class WorkPath:
    """A checked path: ``lexical`` as named (links not followed), ``real`` resolved."""

    root: Path
    rel: str  # relative to the root, "/"-separated, "" for the root
    lexical: Path
    real: Path


def outside(path: str) -> ApiError:
    return ApiError("path_outside_workdir", f"'{path}' is outside the chat's work folder; refused.")


def not_found(path: str) -> ApiError:
    return ApiError("file_not_found", f"'{path}' does not exist in the work folder.")


async def work_root(runtime: Runtime, input: dict[str, Any]) -> Path:
    """The work folder of the chat named by ``context`` (or of new chats), created if missing
    (404 ``context_not_found`` for an unknown chat)."""
    ctx_id = context_id_of(input, "context", "context_id", "ctxid")
    config = (await runtime.chats.chat(ctx_id)).config if ctx_id else runtime.agent_config()
    return await asyncio.to_thread(_make_root, Path(config.workdir_path()))


def _make_root(folder: Path) -> Path:
    root = folder.expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve(root: Path, raw: str, *, link_itself: bool = False) -> WorkPath:
    """``raw`` as a WorkPath inside ``root``, or ``path_outside_workdir``.

    ``link_itself``: when the last part is a symbolic link, the link is meant (delete removes
    the link, wherever it points); its folder must still be inside.
    """
    if "\x00" in raw:
        raise bad_request("'path' must not contain NUL characters", field="path")
    text = raw.strip()
    if len(text.encode()) > MAX_PATH_BYTES or any(
        len(part.encode()) > MAX_NAME_BYTES for part in Path(text).parts
    ):  # the file system would refuse it (ENAMETOOLONG) wherever it is used
        raise bad_request("'path' is too long", field="path")
    lexical = Path(os.path.normpath(root / text)) if text else root
    try:
        if link_itself and lexical != root and lexical.is_symlink():
            real = lexical.parent.resolve(strict=False) / lexical.name
        else:
            real = lexical.resolve(strict=False)
    except (OSError, RuntimeError):  # a link loop
        raise outside(raw) from None
    if not _inside(lexical, root) or not _inside(real, root):
        raise outside(raw)
    rel = lexical.relative_to(root).as_posix()
    return WorkPath(root, "" if rel == "." else rel, lexical, real)


def require_path(input: dict[str, Any], key: str = "path") -> str:
    value = get_str(input, key)
    if not value.strip():
        raise bad_request(f"'{key}' is required", field=key)
    return value


def entry(root: Path, path: Path) -> dict[str, Any]:
    """One listing row; a link shows what it points to (``outside`` when it leaves the folder)."""
    info = path.lstat()
    link = stat.S_ISLNK(info.st_mode)
    kind, size, leaves = "other", info.st_size, False
    if link:
        try:
            target = path.resolve(strict=True)
            leaves = not _inside(target, root)
            info = target.stat()
        except (OSError, RuntimeError):
            leaves = True
    if not leaves:
        kind = (
            "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else kind
        )
        size = info.st_size if kind == "file" else 0
    return {
        "name": path.name,
        "path": path.relative_to(root).as_posix(),
        "type": "link" if leaves else kind,
        "size": size,
        "modified": info.st_mtime,
        "link": link,
        "outside": leaves,
    }


def listing(target: WorkPath) -> dict[str, Any]:
    if not target.real.exists():
        raise not_found(target.rel)
    if not target.real.is_dir():
        raise ApiError("not_a_directory", f"'{target.rel}' is a file, not a folder.")
    rows = []
    for child in target.lexical.iterdir():
        try:
            rows.append(entry(target.root, child))
        except FileNotFoundError:  # removed while listing
            continue
    rows.sort(key=lambda r: (r["type"] != "dir", r["name"].lower()))
    parent = None if not target.rel else Path(target.rel).parent.as_posix()
    return {
        "root": str(target.root),
        "path": target.rel,
        "parent": "" if parent == "." else parent,
        "entries": rows,
    }


async def save_upload(folder: WorkPath, upload: UploadFile) -> dict[str, Any]:
    """Write one uploaded file into ``folder`` (same name replaces; nothing half-written)."""
    name = Path(upload.filename or "").name
    if name in ("", ".", "..") or "\x00" in name:
        raise bad_request("each uploaded file needs a file name", field="files")
    target = resolve(folder.root, f"{folder.rel}/{name}" if folder.rel else name)
    if target.real.is_dir():
        raise ApiError("is_a_directory", f"'{target.rel}' is a folder; not replaced.")
    size = await write_upload(upload, target.real, name, MAX_UPLOAD_BYTES, "100 MiB")
    return {"name": name, "path": target.rel, "size": size}


async def write_upload(
    upload: UploadFile, target: Path, name: str, limit: int, limit_text: str
) -> int:
    """Stream ``upload`` (``name`` to the user) into ``target`` through a temporary file
    beside it, replaced in one step (nothing half-written stays); more than ``limit`` bytes
    is ``payload_too_large``. Returns the size written."""
    tmp = target.parent / f".{name}.upload-{os.getpid()}-{id(upload)}"
    size = 0
    try:
        with open(tmp, "wb") as out:
            while chunk := await upload.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise ApiError("payload_too_large", f"'{name}' is larger than {limit_text}.")
                await asyncio.to_thread(out.write, chunk)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return size
