"""python/helpers/images.py and image parts in history (#20)."""

from __future__ import annotations

import asyncio
import io

import pytest
from PIL import Image

from python.helpers import images
from python.helpers.history import History

pytestmark = pytest.mark.unit


def encoded(width: int, height: int, fmt: str = "PNG", mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    Image.new(mode, (width, height)).save(out, format=fmt)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "GIF"])
def test_each_format_becomes_a_jpeg_within_the_limit(fmt):
    prepared = images.prepare(encoded(1600, 1000, fmt), f"x.{fmt.lower()}")
    assert prepared.data.startswith(b"\xff\xd8\xff")
    assert prepared.width * prepared.height <= images.MAX_PIXELS
    assert abs(prepared.width / prepared.height - 1.6) < 0.01
    assert prepared.source_format == fmt


def test_small_images_keep_their_size_and_transparency_is_flattened():
    prepared = images.prepare(encoded(30, 20, "PNG", "RGBA"))
    assert (prepared.width, prepared.height) == (30, 20)
    assert Image.open(io.BytesIO(prepared.data)).mode == "RGB"


@pytest.mark.parametrize(
    "data",
    [b"", b"plain text", encoded(50, 50)[:60], encoded(10, 10, "BMP"), encoded(10, 10, "TIFF")],
)
def test_what_is_not_a_usable_image_is_image_invalid(data):
    with pytest.raises(images.ImageInvalid) as caught:
        images.prepare(data, "a.png")
    assert caught.value.to_dict()["code"] == "image_invalid"


def test_history_sends_parts_only_for_messages_with_images():
    history = History()
    history.add(False, "plain")
    part = images.image_part("ab" * 32, "p.png", 10, 10)
    history.add(False, [{"type": "text", "text": "look"}, part])
    history.add(True, "ok")
    [user, assistant] = history.output()
    assert user["content"] == [
        {"type": "text", "text": "plain"},
        {"type": "text", "text": "look"},
        part,
    ]
    assert assistant["content"] == "ok"
    assert "[image: p.png]" in history.output_text()
    assert history.tokens() >= images.TOKENS_PER_IMAGE


def test_the_transport_reads_blobs_or_sends_text_only():
    part = images.image_part("cd" * 32, "p.png", 1, 1)
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}]

    async def read(blob: str) -> bytes:
        assert blob == "cd" * 32
        return b"\xff\xd8\xffjpeg"

    sent = asyncio.run(images.to_wire(messages, True, read))
    assert sent[0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64,/9j/anBlZw=="},
    }
    assert asyncio.run(images.to_wire(messages, False, read)) == [{"role": "user", "content": "hi"}]
    plain = [{"role": "user", "content": "text"}]
    assert asyncio.run(images.to_wire(plain, True, read)) is plain
