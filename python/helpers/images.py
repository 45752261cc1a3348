"""Images for a vision model: preparing them (Pillow), and the parts history keeps of them.

An image enters a chat in one of two ways: an attachment of a user message (png, jpeg, webp,
gif) or the ``vision_load`` tool. Either way it is prepared as upstream Agent Zero prepares
one (at most 768,000 pixels, aspect kept, Lanczos, RGB, JPEG quality 75), stored once in the
journal as a blob under its SHA-256, and history holds only a small *image part* naming the
blob: ``{"type": "image", "blob": <sha256>, "name", "width", "height"}``. The model transport
(python/helpers/models.py) turns each such part into the OpenAI ``image_url`` part with the
blob's bytes as a data URL, or drops it when the chat model has no vision. A resumed run
reads the same blob, so it sends the same bytes; a checkpoint holds only the digest.
"""

from __future__ import annotations

import base64
import io
import math
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from python.helpers.errors import DomainError

MAX_PIXELS = 768_000  # upstream's limit for one image sent to the model
JPEG_QUALITY = 75
TOKENS_PER_IMAGE = 1500  # upstream's estimate of one image part
MAX_SOURCE_BYTES = 50 * 1024 * 1024
MAX_SOURCE_PIXELS = 100_000_000  # larger pictures are refused before decoding (bombs)
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".webp", ".gif"})
PART_TYPE = "image"
SENT_MIME = "image/jpeg"

#: Reads a blob's bytes by its digest (the chat's journal).
BlobReader = Callable[[str], Awaitable[bytes]]


class ImageInvalid(DomainError):
    """Bytes that are not a readable png, jpeg, webp or gif image (or are too large)."""

    code = "image_invalid"


@dataclass(frozen=True)
class PreparedImage:
    data: bytes  # JPEG
    width: int
    height: int
    source_format: str


def is_image_name(name: str) -> bool:
    """Whether a file name says it is an image this module prepares."""
    return Path(name).suffix.lower() in EXTENSIONS


def fitted_size(width: int, height: int, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """The size of a ``width`` x ``height`` picture scaled (aspect kept) to ``max_pixels``."""
    if width * height <= max_pixels:
        return width, height
    scale = math.sqrt(max_pixels / (width * height))
    new_w, new_h = max(1, int(width * scale)), max(1, int(height * scale))
    while new_w * new_h > max_pixels:  # rounding never lands above the limit
        new_w, new_h = max(1, new_w - 1), max(1, new_h - 1)
    return new_w, new_h


def prepare(data: bytes, name: str = "image") -> PreparedImage:
    """Decode ``data`` and re-encode it for the model; ImageInvalid when it is no image of
    the four formats, is damaged, or is too large. Deterministic: the same bytes give the
    same JPEG with the same Pillow."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    if len(data) > MAX_SOURCE_BYTES:
        raise ImageInvalid(f"'{name}' is too large for an image ({len(data)} bytes).", name=name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                fmt = str(image.format or "")
                if fmt not in FORMATS:
                    raise ImageInvalid(
                        f"'{name}' is not a png, jpeg, webp or gif image ({fmt or 'unknown'}).",
                        name=name,
                    )
                if image.width * image.height > MAX_SOURCE_PIXELS:
                    raise ImageInvalid(f"'{name}' has too many pixels.", name=name)
                image.seek(0)  # an animation: its first frame
                picture = ImageOps.exif_transpose(image.convert("RGBA"))
    except ImageInvalid:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageInvalid(f"'{name}' is not an image that can be read.", name=name) from None
    except (OSError, ValueError, SyntaxError, EOFError):
        raise ImageInvalid(f"'{name}' is a damaged image.", name=name) from None
    size = fitted_size(picture.width, picture.height)
    if size != picture.size:
        picture = picture.resize(size, Image.Resampling.LANCZOS)
    rgb = Image.new("RGB", picture.size, (255, 255, 255))
    rgb.paste(picture, mask=picture.getchannel("A"))
    out = io.BytesIO()
    rgb.save(out, format="JPEG", quality=JPEG_QUALITY)
    return PreparedImage(out.getvalue(), rgb.width, rgb.height, fmt)


def image_part(blob: str, name: str, width: int, height: int) -> dict[str, Any]:
    """The part history keeps for a prepared image stored as blob ``blob``."""
    return {"type": PART_TYPE, "blob": blob, "name": name, "width": width, "height": height}


def is_image_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == PART_TYPE and "blob" in part


def is_parts(content: Any) -> bool:
    """Whether a message content is a list of typed parts (text and images)."""
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(p, dict) and p.get("type") in ("text", PART_TYPE) for p in content)
    )


def parts_text(parts: list[dict[str, Any]]) -> str:
    """The text of parts: the text parts, and a short preview for each image."""
    texts = []
    for part in parts:
        if part.get("type") == "text":
            texts.append(str(part.get("text") or ""))
        else:
            texts.append(f"[image: {part.get('name') or 'image'}]")
    return "\n\n".join(t for t in texts if t)


def image_count(content: Any) -> int:
    return sum(1 for p in content if is_image_part(p)) if isinstance(content, list) else 0


def as_parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


async def to_wire(messages: list[dict], vision: bool, read: BlobReader | None) -> list[dict]:
    """Messages as the provider gets them: each image part becomes an OpenAI ``image_url``
    part with its blob as a JPEG data URL; without vision (or without a reader) image parts
    are dropped and a message left with text only is sent as plain text."""
    if not any(image_count(m.get("content")) for m in messages):
        return messages
    cache: dict[str, str] = {}
    wire = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not image_count(content):
            wire.append(message)
            continue
        parts: list[dict[str, Any]] = []
        for part in content:
            if not is_image_part(part):
                parts.append(part)
            elif vision and read is not None:
                blob = str(part["blob"])
                if blob not in cache:
                    cache[blob] = base64.b64encode(await read(blob)).decode("ascii")
                url = f"data:{SENT_MIME};base64,{cache[blob]}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
        if all(p.get("type") == "text" for p in parts):
            wire.append({**message, "content": "\n\n".join(str(p.get("text")) for p in parts)})
        else:
            wire.append({**message, "content": parts})
    return wire
