"""Vision (#20): image attachments and vision_load reach the scripted model as OpenAI image
parts within upstream's limits; images live once in the journal; a crash after the model
saw an image reuses its committed reply. Real run_ui.py processes, real SQLite, SIGKILL."""

from __future__ import annotations

import base64
import io
import signal
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.integration._durable_system import crashable
from tests.integration._helpers import chat_log, request_text
from tests.support.model_server import ScriptedModel
from tests.support.ui_server import UiServer

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

MAX_PIXELS = 768_000


def picture(width: int, height: int, fmt: str = "PNG") -> bytes:
    """A real image: a left half red and a right half blue, so scaling keeps a shape."""
    image = Image.new("RGB", (width, height), (220, 30, 30))
    image.paste((30, 30, 220), (width // 2, 0, width, height))
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


def image_parts(request: dict) -> list[dict]:
    found = []
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            found.extend(p for p in content if p.get("type") == "image_url")
    return found


def decoded(part: dict) -> Image.Image:
    url = part["image_url"]["url"]
    prefix = "data:image/jpeg;base64,"
    assert url.startswith(prefix), url[:40]
    return Image.open(io.BytesIO(base64.b64decode(url[len(prefix) :])))


def attachment(name: str, data: bytes) -> dict[str, str]:
    return {"filename": name, "base64": base64.b64encode(data).decode("ascii")}


def jpeg_bytes(part: dict) -> bytes:
    return base64.b64decode(part["image_url"]["url"].split(",", 1)[1])


def occurrences(db: Path, needle: bytes) -> dict[str, int]:
    """In how many rows of each table (any column) ``needle`` occurs, as bytes or as text."""
    counts: dict[str, int] = {}
    with closing(sqlite3.connect(db)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info('{table}')")]
            for row in conn.execute(f"SELECT * FROM '{table}'"):
                for column, value in zip(columns, row, strict=True):
                    raw = value.encode() if isinstance(value, str) else value
                    if isinstance(raw, bytes) and needle in raw:
                        key = f"{table}.{column}"
                        counts[key] = counts.get(key, 0) + raw.count(needle)
    return counts


def test_image_attachment_reaches_the_model_as_a_scaled_image_part(
    running_ui: UiServer, model_server: ScriptedModel
):
    model_server.tool("response", {"text": "red and blue"})
    big = picture(2400, 1600)  # 3.84 million pixels: must be scaled to at most 768,000
    answer = running_ui.api_message(
        "What colours?", attachments=[attachment("photo.png", big)], input_id="img-1"
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["response"] == "red and blue"
    parts = image_parts(model_server.requests[0])
    assert len(parts) == 1
    image = decoded(parts[0])
    assert image.format == "JPEG"
    assert image.width * image.height <= MAX_PIXELS
    assert image.width * image.height > MAX_PIXELS * 0.98  # scaled to the limit, not below
    assert abs(image.width / image.height - 1.5) < 0.01  # aspect kept
    left, right = image.getpixel((10, image.height // 2)), image.getpixel((image.width - 10, 5))
    assert left[0] > 150 > left[2] and right[2] > 150 > right[0]
    # the user message's text still names the attachment (upstream's path listing)
    user = next(m for m in model_server.requests[0]["messages"] if isinstance(m["content"], list))
    text = " ".join(p.get("text", "") for p in user["content"] if p["type"] == "text")
    assert "What colours?" in text and "photo.png" in text

    # the same input again is the recorded run (the image parts do not change its digest)
    again = running_ui.api_message(
        "What colours?", attachments=[attachment("photo.png", big)], input_id="img-1"
    )
    assert again.json()["run_id"] == answer.json()["run_id"]
    assert model_server.calls == 1

    # the chat shows it: the log item names the blob, image_get serves the JPEG
    items = chat_log(running_ui, answer.json()["context_id"])
    user_item = next(i for i in items if i["type"] == "user")
    [shown] = user_item["kvps"]["images"]
    with running_ui.ui_client() as client:
        served = client.get("/api/image_get", params={"blob": shown["blob"]})
        assert served.status_code == 200
        assert served.headers["content-type"] == "image/jpeg"
        assert served.content == jpeg_bytes(parts[0])
        missing = client.get("/api/image_get", params={"blob": "0" * 64})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_an_image_that_is_not_an_image_is_refused_and_takes_no_run(
    running_ui: UiServer, model_server: ScriptedModel
):
    bad = running_ui.api_message(
        "look", attachments=[attachment("shot.png", b"this is text, not a png")]
    )
    assert bad.status_code == 400, bad.text
    error = bad.json()["error"]
    assert error["code"] == "image_invalid" and error["name"].endswith("shot.png")
    cut = picture(300, 200)[:200]  # a damaged png
    damaged = running_ui.api_message("look", attachments=[attachment("cut.png", cut)])
    assert damaged.json()["error"]["code"] == "image_invalid"
    runs = httpx.post(
        f"{running_ui.url}/api/durable_runs", json={}, headers={"X-API-KEY": "test-token"}
    )
    assert runs.json()["runs"] == []
    assert model_server.calls == 0
    # a file that is not named as an image is an ordinary attachment, listed by path
    model_server.tool("response", {"text": "read it"})
    plain = running_ui.api_message("read", attachments=[attachment("notes.txt", b"hello")])
    assert plain.status_code == 200, plain.text
    assert image_parts(model_server.requests[0]) == []


def test_vision_off_sends_text_only(ui_server: UiServer, model_server: ScriptedModel):
    from tests.support.ui_server import SLOW_START, ui_env_for

    ui_server.env.update({**ui_env_for(model_server), "A0_SET_chat_model_vision": "false"})
    ui_server.start(timeout=SLOW_START)
    model_server.tool("response", {"text": "a file"})
    answer = ui_server.api_message("see", attachments=[attachment("p.png", picture(40, 30))])
    assert answer.status_code == 200, answer.text
    request = model_server.requests[0]
    assert all(isinstance(m["content"], str) for m in request["messages"])
    assert "p.png" in request["messages"][-1]["content"]
    assert "vision_load" not in request["messages"][0]["content"]  # no tool prompt either
    assert ui_server.stop() == 0


def test_vision_load_shows_files_and_reports_bad_ones(
    running_ui: UiServer, model_server: ScriptedModel
):
    workdir = running_ui.usr_dir / "workdir"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "chart.webp").write_bytes(picture(1200, 900, "WEBP"))
    (workdir / "fake.gif").write_bytes(b"GIF89a but nothing else")
    model_server.tool("vision_load", {"paths": ["chart.webp", "fake.gif", "/nowhere/x.png"]})
    model_server.tool("response", {"text": "seen"})
    answer = running_ui.api_message("look at the chart")
    assert answer.status_code == 200, answer.text
    assert "vision_load" in model_server.requests[0]["messages"][0]["content"]  # the prompt
    second = model_server.requests[1]
    [part] = image_parts(second)
    image = decoded(part)
    assert image.width * image.height <= MAX_PIXELS
    assert abs(image.width / image.height - 4 / 3) < 0.01
    text = request_text(second)
    assert "fake.gif: image_invalid" in text and "/nowhere/x.png: image_invalid" in text
    items = chat_log(running_ui, answer.json()["context_id"])
    tool_item = next(i for i in items if i["type"] == "tool" and "vision_load" in i["heading"])
    assert [i["name"] for i in tool_item["kvps"]["images"]] == ["chart.webp"]


def _send_async(server: UiServer, body: dict[str, Any]) -> threading.Thread:
    def send() -> None:
        try:
            httpx.post(
                f"{server.url}/api/api_message",
                json=body,
                headers={"X-API-KEY": "test-token"},
                timeout=120,
            )
        except httpx.HTTPError:
            pass  # the server killed itself mid-request

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def test_crash_after_the_model_saw_an_image_reuses_its_reply_and_stores_the_image_once(
    crashable, model_server: ScriptedModel
):
    model_server.tool("response", {"text": "a red and blue flag"})
    data = picture(1600, 1200)
    body = {
        "message": "describe it",
        "input_id": "flag",
        "attachments": [attachment("flag.png", data)],
    }
    server = crashable.start(A0_CRASH_AT="after_result", A0_CRASH_MATCH="model")
    sender = _send_async(server, body)
    assert server.process is not None
    code = server.process.wait(120)
    sender.join(30)
    server.kill()
    assert code == -signal.SIGKILL, server.output()[-3000:]
    assert model_server.calls == 1
    sent = jpeg_bytes(image_parts(model_server.requests[0])[0])

    crashable.start()
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed")
    assert model_server.calls == 1  # the committed reply was reused, the model not asked again
    again = crashable.post("api_message", body)  # the retry gets the recorded answer
    assert again.json()["response"] == "a red and blue flag"

    # a second message in the chat: the model gets the very same image bytes again
    model_server.tool("response", {"text": "still a flag"})
    follow = crashable.server.api_message("and now?", context_id=done["context_id"])
    assert follow.status_code == 200, follow.text
    [resent] = image_parts(model_server.requests[1])
    assert jpeg_bytes(resent) == sent
    crashable.stop()

    db = crashable.usr / "durability" / "journal.sqlite"
    assert occurrences(db, sent) == {"blobs.data": 1}  # one blob, nowhere else
    encoded = base64.b64encode(sent[:300]).decode("ascii").encode()
    assert occurrences(db, encoded) == {}  # no base64 copy in checkpoints, calls or events
