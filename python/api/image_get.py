"""GET|POST /api/image_get: an image the chat shows, from the journal by its blob digest.

Upstream's endpoint of this name serves a local file by path; here every image a chat shows
(attachments, vision_load) lives in the journal as a prepared JPEG, so it is named by its
SHA-256 (``blob``, from the log item's ``images``). Only JPEG blobs are served: any other
blob (history, documents) is ``not_found``.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.responses import Response

from durability.errors import BlobNotFound
from python.server.api import ApiError, ApiHandler, bad_request, get_str

_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_JPEG = b"\xff\xd8\xff"


class ImageGet(ApiHandler):
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> Response:
        blob = get_str(input, "blob", required=True)
        if not _DIGEST.match(blob):
            raise bad_request("'blob' must be a SHA-256 digest (64 lowercase hex digits)")
        try:
            data = await self.runtime.journal.aio.get_blob(blob)
        except BlobNotFound:
            raise ApiError("not_found", "No such image.") from None
        if not data.startswith(_JPEG):
            raise ApiError("not_found", "No such image.")
        headers = {
            "Cache-Control": "private, max-age=86400, immutable",
            "X-Content-Type-Options": "nosniff",
        }
        return Response(data, media_type="image/jpeg", headers=headers)
