"""Shared pieces of the chat endpoints: picking the chat, attachments, the user message."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile

from agent import AgentContext, UserMessage
from python.durable.admission import Admitted, Submission, SubmitOptions
from python.helpers import images
from python.helpers.errors import ChatStopped
from python.server.api import ApiError, bad_request, get_list, get_str
from python.server.runtime import Runtime

MAX_ATTACHMENT_BYTES = 50 * 1024 * 1024
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def context_id_of(input: dict[str, Any], *keys: str) -> str:
    """The first non-empty chat id under any of the given keys (validated as a string)."""
    for key in keys:
        value = get_str(input, key)
        if value:
            return value
    return ""


async def require_context(runtime: Runtime, input: dict[str, Any], *keys: str) -> AgentContext:
    """The chat named under ``keys`` (400 when missing, 404 when unknown or purged)."""
    ctx_id = context_id_of(input, *keys)
    if not ctx_id:
        raise bad_request(f"'{keys[0]}' is required")
    return await runtime.chats.chat(ctx_id)


def safe_filename(name: str) -> str:
    cleaned = _UNSAFE.sub("_", Path(name).name).strip("._") or "file"
    return cleaned[:120]


def _write_upload(folder: Path, name: str, data: bytes) -> str:
    """Save an upload under a name made of its content's digest and its safe name: a
    retried request (same input id) names the same file, so its content digest matches
    and admission finds the recorded run instead of an ``input_conflict``. Written to a
    private temporary file first, then renamed: concurrent copies never see half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:16]}_{safe_filename(name)}"
    partial = folder / f".{secrets.token_hex(8)}.part"
    partial.write_bytes(data)
    os.replace(partial, path)
    return str(path)


async def save_form_files(runtime: Runtime, files: Any) -> list[str]:
    """Multipart uploads (field 'attachments') saved under usr/uploads/; returns their paths."""
    if not files:
        return []
    if not isinstance(files, list):
        raise bad_request("'attachments' must be files")
    paths = []
    for upload in files:
        if not isinstance(upload, UploadFile):
            raise bad_request("'attachments' must be files")
        data = await upload.read()
        if len(data) > MAX_ATTACHMENT_BYTES:
            raise ApiError("payload_too_large", "An attachment is too large.")
        name = upload.filename or "file"
        paths.append(await asyncio.to_thread(_write_upload, runtime.usr / "uploads", name, data))
    return paths


async def save_base64_files(runtime: Runtime, input: dict[str, Any]) -> list[str]:
    """External API attachments: [{filename, base64}] saved under usr/uploads/."""
    paths = []
    for item in get_list(input, "attachments"):
        if not isinstance(item, dict):
            raise bad_request("each attachment must be an object {filename, base64}")
        name = get_str(item, "filename", required=True)
        encoded = get_str(item, "base64", required=True)
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise bad_request(f"attachment '{name}' is not valid base64") from None
        if len(data) > MAX_ATTACHMENT_BYTES:
            raise ApiError("payload_too_large", "An attachment is too large.")
        paths.append(await asyncio.to_thread(_write_upload, runtime.usr / "uploads", name, data))
    return paths


def _prepare_file(path: str) -> images.PreparedImage:
    return images.prepare(Path(path).read_bytes(), Path(path).name)


async def image_parts(runtime: Runtime, attachments: list[str]) -> list[dict[str, Any]]:
    """With ``chat_model_vision`` on, each attachment named as a png, jpeg, webp or gif is
    prepared for the model (python/helpers/images.py) and stored once in the journal; its
    image part goes into history with the message. Not an image after all: ImageInvalid
    (``image_invalid``), and the message is not taken."""
    if not runtime.settings.get("chat_model_vision", True):
        return []
    parts = []
    for path in attachments:
        if not images.is_image_name(path):
            continue
        prepared = await asyncio.to_thread(_prepare_file, path)
        blob = await runtime.journal.aio.put_blob(prepared.data)
        name = Path(path).name
        parts.append(images.image_part(blob, name, prepared.width, prepared.height))
    return parts


def log_user_message(
    ctx: AgentContext,
    text: str,
    attachments: list[str],
    message_id: str | None,
    image_list: list[dict[str, Any]] | None = None,
) -> None:
    """Show the user's message in the chat log (as upstream's message endpoints do); its
    images by blob (the UI shows them through ``image_get``)."""
    kvps: dict[str, Any] = {}
    if attachments:
        kvps["attachments"] = [Path(p).name for p in attachments]
    if image_list:
        kvps["images"] = [{"blob": p["blob"], "name": p["name"]} for p in image_list]
    ctx.log.log(type="user", heading="User message", content=text, kvps=kvps or None, id=message_id)


async def admit_user_message(
    runtime: Runtime, input: dict[str, Any]
) -> tuple[AgentContext | None, UserMessage, Submission]:
    """Validate, admit (journal: duplicate / conflict / held / intervention) and log the
    message when it was taken; returns (chat or None, UserMessage, Submission).
    The chat is None only for a duplicate whose chat is not loaded (``admitted.context_id``)."""
    text = get_str(input, "text")
    ctx_id = context_id_of(input, "context")
    client_message_id = get_str(input, "message_id")
    message_id = client_message_id or secrets.token_hex(8)
    attachments = await save_form_files(runtime, input.get("attachments"))
    if not text.strip() and not attachments:
        raise bad_request("'text' is required")
    message = UserMessage(text, attachments, id=message_id)
    message.images = await image_parts(runtime, attachments)
    options = SubmitOptions(follow_input=bool(client_message_id))
    ctx, admitted = await runtime.admit_message(ctx_id, message, options)
    if ctx is not None and admitted.kind != Admitted.DUPLICATE:
        log_user_message(ctx, message.message, attachments, message_id, message.images)
    return ctx, message, admitted


async def wait_answer(task: asyncio.Task[str] | None) -> str | None:
    """Wait for a chat's task: a cancelled request never cancels the chat (shielded); a
    chat stopped before it answered is ``chat_stopped``."""
    if task is None:
        return None
    try:
        result = await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.cancelled():
            raise ChatStopped("The chat was stopped before it answered.") from None
        raise
    return "" if result is None else str(result)
