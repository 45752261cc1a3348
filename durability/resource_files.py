"""Resource names and files: which names are safe, and reading and writing them below a
folder without ever following a link (durability/resources.py stores them)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from durability.errors import ResourceRefused

MAX_NAME_LENGTH = 4096
MAX_COMPONENT_BYTES = 255


def check_name(name: object) -> tuple[str, ...]:
    """The components of a safe relative name; ResourceRefused for anything that could
    leave its folder or is not a plain name."""

    def refuse(reason: str) -> ResourceRefused:
        shown = name[:200] if isinstance(name, str) else repr(name)[:200]
        return ResourceRefused(f"refused resource name ({reason})", path=shown, reason=reason)

    if not isinstance(name, str) or not name:
        raise refuse("empty")
    if len(name) > MAX_NAME_LENGTH:
        raise refuse("too_long")
    if "\x00" in name:
        raise refuse("nul")
    if "\\" in name:
        raise refuse("backslash")
    if name.startswith("/"):
        raise refuse("absolute")
    parts = tuple(name.split("/"))
    for part in parts:
        if part == "..":
            raise refuse("parent")
        if part in ("", "."):
            raise refuse("not_normal")
        if len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES:
            raise refuse("too_long")
    return parts


def check_tree(names: list[str]) -> None:
    """No duplicates, and no name that is both a file and a folder of another."""
    files = set()
    for name in names:
        if name in files:
            raise ResourceRefused(
                "a resource name appears twice", path=name[:200], reason="duplicate"
            )
        files.add(name)
    for name in names:
        parts = name.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in files:
                raise ResourceRefused(
                    "a resource name is both a file and a folder",
                    path=name[:200],
                    reason="file_is_folder",
                )


def read_regular(root: Path, rel: str) -> bytes | None:
    """The bytes of a regular file below ``root``, opened without following any link."""
    fds: list[int] = []
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        fds.append(fd)
        *dirs, name = rel.split("/")
        for part in dirs:
            fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            fds.append(fd)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        fds.append(fd)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read()
    except OSError:  # a link where a folder was, or the file vanished
        return None
    finally:
        for opened in reversed(fds):
            os.close(opened)


def write_tree(target: Path, files: list[tuple[str, int, bytes]]) -> None:
    """Write ``files`` (name, mode, bytes) below the new folder ``target``, never through
    a link and never over an existing file."""
    root = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for rel, mode, data in files:
            *dirs, name = rel.split("/")
            fds: list[int] = []
            fd = root
            try:
                for part in dirs:
                    try:
                        os.mkdir(part, 0o700, dir_fd=fd)
                    except FileExistsError:
                        pass
                    fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                    fds.append(fd)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                out = os.open(name, flags, 0o700 if mode & 0o100 else 0o600, dir_fd=fd)
                with os.fdopen(out, "wb") as fh:
                    fh.write(data)
            finally:
                for opened in reversed(fds):
                    os.close(opened)
    finally:
        os.close(root)
