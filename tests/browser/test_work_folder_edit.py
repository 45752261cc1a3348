"""Edit and rename in the work-folder browser, and Export / Import chats, in a real browser
(#23 point 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "upstream_chats" / "chat_v1_7.json"


def _open_files(page: Page, url: str):
    page.goto(url)
    page.get_by_test_id("files-open").click()
    dialog = page.get_by_test_id("files-dialog")
    expect(dialog).to_be_visible(timeout=TIMEOUT_MS)
    return dialog


def test_edit_a_file_and_rename_it(page: Page, running_ui):
    work = running_ui.usr_dir / "workdir"
    work.mkdir(parents=True, exist_ok=True)
    (work / "todo.md").write_text("- one\n", encoding="utf-8")
    dialog = _open_files(page, running_ui.url)
    row = dialog.get_by_test_id("files-entry").filter(has_text="todo.md")

    row.get_by_test_id("files-edit").click()
    editor = page.get_by_test_id("file-edit-dialog")
    expect(editor).to_be_visible()
    expect(page.get_by_test_id("file-edit-path")).to_have_text("todo.md")
    text = page.get_by_test_id("file-edit-text")
    expect(text).to_have_value("- one\n")
    text.fill("- one\n- two\n")
    page.get_by_test_id("file-edit-cancel").click()  # unsaved changes: asks first
    expect(page.get_by_test_id("confirm-dialog")).to_be_visible()
    page.get_by_test_id("confirm-cancel").click()  # keep editing
    expect(editor).to_be_visible()
    expect(text).to_have_value("- one\n- two\n")
    page.get_by_test_id("file-edit-save").click()
    expect(editor).to_be_hidden()
    expect(dialog.get_by_test_id("files-message")).to_contain_text("Saved todo.md")
    assert (work / "todo.md").read_text(encoding="utf-8") == "- one\n- two\n"

    row.get_by_test_id("files-rename").click()
    field = dialog.get_by_test_id("files-rename-input")
    expect(field).to_have_value("todo.md")
    field.fill("done.md")
    field.press("Enter")
    expect(dialog.get_by_test_id("files-message")).to_contain_text("Renamed todo.md to done.md")
    expect(dialog.get_by_test_id("files-entry").filter(has_text="done.md")).to_have_count(1)
    assert (work / "done.md").is_file() and not (work / "todo.md").exists()

    (work / "taken.md").write_text("x")
    dialog.get_by_test_id("files-refresh").click()
    # the list before Refresh also has done.md: wait for the new one, or its answer could
    # redraw the list under the rename field
    expect(dialog.get_by_test_id("files-entry").filter(has_text="taken.md")).to_have_count(1)
    renamed = dialog.get_by_test_id("files-entry").filter(has_text="done.md")
    renamed.get_by_test_id("files-rename").click()
    dialog.get_by_test_id("files-rename-input").fill("taken.md")
    dialog.get_by_test_id("files-rename-save").click()
    expect(dialog.get_by_test_id("files-message")).to_contain_text("file_exists")
    assert (work / "taken.md").read_text() == "x"


def test_export_and_import_chats(page: Page, running_ui, model_server, tmp_path: Path):
    model_server.tool("response", {"text": "exported answer"})
    reply = running_ui.api_message("please export me")
    assert reply.status_code == 200, reply.text
    ctx = reply.json()["context_id"]

    page.goto(running_ui.url)
    item = page.locator(f'[data-testid="chat-item"][data-ctxid="{ctx}"]')
    expect(item).to_be_visible(timeout=TIMEOUT_MS)
    item.click()
    expect(page.get_by_test_id("export-chat")).to_be_enabled(timeout=TIMEOUT_MS)
    with page.expect_download() as info:
        page.get_by_test_id("export-chat").click()
    download = info.value
    assert download.suggested_filename == f"{ctx}.json"
    chat = json.loads(Path(download.path()).read_text(encoding="utf-8"))
    assert isinstance(chat["agents"][0]["history"], str) and "logs" in chat["log"]
    assert "exported answer" in chat["agents"][0]["history"]

    before = page.get_by_test_id("chat-item").count()
    page.get_by_test_id("chat-import").set_input_files([str(FIXTURE)])
    expect(page.get_by_test_id("chat-item")).to_have_count(before + 1, timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("chat-title")).to_have_text("Files chat", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("messages")).to_contain_text("a.txt holds the word alpha.")
