"""vision_load: images for the model to look at (``paths``: local image files).

Each path (absolute, or relative to the chat's work folder) is read and prepared as every
image is (python/helpers/images.py: at most 768,000 pixels, JPEG), stored once in the chat's
journal under its SHA-256, and shown to the model in one user-side history message of image
parts; a path that is missing or not an image gets a line with its error code instead.

It only reads local files, and the one thing it writes is a content-addressed blob (the same
bytes under the same digest: writing it again changes nothing), so it is on the safe-replay
allowlist (durability/replay.py pins this file's SHA-256). Keep it that way: any change
needs a review of that claim and a new pin.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from python.helpers import images
from python.helpers.tool import Response, Tool

MAX_IMAGES = 10  # upstream's max_embeds: the last ten paths of a call are kept


def _read(path: Path) -> images.PreparedImage:
    if not path.is_file():
        raise images.ImageInvalid(f"'{path}' is not a file.", name=path.name)
    return images.prepare(path.read_bytes(), path.name)


class VisionLoad(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        raw = self.args.get("paths")
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list) or not raw:
            return Response("vision_load needs 'paths': a list of image file paths.", False)
        paths = [str(p) for p in raw if isinstance(p, str) and p.strip()][-MAX_IMAGES:]
        workdir = self.agent.config.workdir_path()
        parts: list[dict[str, Any]] = []
        notes: list[str] = []
        for text in paths:
            path = Path(text.strip()).expanduser()
            path = path if path.is_absolute() else workdir / path
            try:
                prepared = await asyncio.to_thread(_read, path)
            except images.ImageInvalid as exc:
                notes.append(f"{text}: {exc.code}: {exc.message}")
                continue
            except OSError as exc:
                notes.append(f"{text}: image_invalid: cannot be read ({exc.strerror or exc}).")
                continue
            blob = await self.agent.store_blob(prepared.data)
            parts.append(images.image_part(blob, path.name, prepared.width, prepared.height))
        if not parts:
            detail = "\n".join(notes)
            return Response(f"No images were processed.\n{detail}".strip(), False)
        names = ", ".join(f"{p['name']} ({p['width']}x{p['height']})" for p in parts)
        message = f"{len(parts)} image(s) loaded for you to look at: {names}."
        if notes:
            message += "\nNot loaded:\n" + "\n".join(notes)
        return Response(message, False, {"images": parts})

    async def after_execution(self, response: Response, **kwargs: Any) -> None:
        """The result text, then one user-side message with the images (as upstream)."""
        extra = dict(response.additional or {})
        found = [p for p in extra.pop("images", None) or [] if images.is_image_part(p)]
        text = response.message.strip() if isinstance(response.message, str) else ""
        self.agent.hist_add_tool_result(self.name, text, **extra)
        if found:
            self.agent.hist_add_message(False, [{"type": "text", "text": "Images:"}, *found])
        if self.log is not None:
            shown = {"images": [_shown(p) for p in found]} if found else None
            self.log.update(content=self.agent.mask(text), kvps=shown)


def _shown(part: dict[str, Any]) -> dict[str, Any]:
    return {"blob": part["blob"], "name": part.get("name") or "image"}
