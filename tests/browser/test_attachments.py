"""Attachments in the message box (#20): a pasted screenshot and a dropped file show before
sending (a thumbnail for the image), reach the model (the image as an image part) and the
chat shows the image."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000

# Builds a DataTransfer holding one file made from base64 bytes, then fires ``kind`` (paste on
# the message box, drop on the send form) the way a browser does for a real paste or drop.
FIRE = """([kind, name, type, b64]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], name, { type }));
  const flags = { bubbles: true, cancelable: true };
  if (kind === "paste") {
    const event = new ClipboardEvent("paste", { clipboardData: data, ...flags });
    document.getElementById("send-input").dispatchEvent(event);
  } else {
    const form = document.getElementById("send-form");
    form.dispatchEvent(new DragEvent("dragover", { dataTransfer: data, ...flags }));
    form.dispatchEvent(new DragEvent("drop", { dataTransfer: data, ...flags }));
  }
}"""


def png(width: int, height: int) -> str:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (40, 160, 60)).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def test_paste_and_drop_show_before_sending_and_the_chat_shows_the_image(
    page: Page, running_ui, model_server
):
    model_server.tool("response", {"text": "A green square and your notes."})
    page.goto(running_ui.url)
    page.get_by_test_id("send-input").fill("What is in the screenshot?")
    page.evaluate(FIRE, ["paste", "image.png", "image/png", png(1200, 1000)])
    page.evaluate(FIRE, ["drop", "notes.txt", "text/plain", base64.b64encode(b"hi").decode()])

    chips = page.get_by_test_id("attach-chip")
    expect(chips).to_have_count(2)
    thumbnail = page.get_by_test_id("attach-thumbnail")
    expect(thumbnail).to_have_count(1)  # the image has a thumbnail, the text file a name
    expect(chips.nth(1)).to_contain_text("notes.txt")
    assert (
        page.evaluate("() => document.querySelector('[data-testid=attach-thumbnail]').naturalWidth")
        == 1200
    )
    expect(page.get_by_test_id("attach-count")).to_have_text("2 files")

    page.get_by_test_id("send-button").click()
    expect(page.get_by_test_id("log-response")).to_contain_text(
        "A green square", timeout=TIMEOUT_MS
    )
    expect(page.get_by_test_id("attach-chip")).to_have_count(0)  # sent: the box is empty again

    request = model_server.requests[0]
    user = [m for m in request["messages"] if isinstance(m["content"], list)]
    assert len(user) == 1
    kinds = [p["type"] for p in user[0]["content"]]
    assert kinds.count("image_url") == 1
    text = " ".join(p.get("text", "") for p in user[0]["content"])
    assert "notes.txt" in text and ".png" in text  # both attachments listed by path

    shown = page.get_by_test_id("log-user").get_by_test_id("chat-image")
    expect(shown).to_have_count(1)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=chat-image]')?.naturalWidth > 0",
        timeout=TIMEOUT_MS,
    )
    width = page.evaluate("() => document.querySelector('[data-testid=chat-image]').naturalWidth")
    height = page.evaluate("() => document.querySelector('[data-testid=chat-image]').naturalHeight")
    assert width * height <= 768_000 and abs(width / height - 1.2) < 0.01  # the prepared image
