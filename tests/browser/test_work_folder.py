"""The work-folder browser in a real browser: upload, download, folders, delete, refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000


def test_upload_download_and_delete_in_the_browser(page: Page, running_ui, tmp_path: Path):
    work = running_ui.usr_dir / "workdir"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "todo.md").write_text("- one\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    os.symlink(outside, work / "escape")
    report = tmp_path / "report.txt"
    report.write_text("quarterly numbers\n")

    page.on("dialog", lambda dialog: dialog.accept())  # the delete confirmation
    page.goto(running_ui.url)
    page.get_by_test_id("files-open").click()
    dialog = page.get_by_test_id("files-dialog")
    expect(dialog).to_be_visible(timeout=TIMEOUT_MS)
    entries = dialog.get_by_test_id("files-entry")
    expect(entries).to_have_count(2, timeout=TIMEOUT_MS)
    escape = entries.filter(has_text="escape")
    expect(escape).to_contain_text("link outside the folder")
    expect(escape.get_by_test_id("files-download")).to_have_count(0)

    dialog.get_by_test_id("files-upload").set_input_files(str(report))
    expect(dialog.get_by_test_id("files-message")).to_contain_text("Uploaded report.txt")
    expect(entries).to_have_count(3)
    assert (work / "report.txt").read_text() == "quarterly numbers\n"

    row = entries.filter(has_text="report.txt")
    with page.expect_download() as info:
        row.get_by_test_id("files-download").click()
    download = info.value
    assert download.suggested_filename == "report.txt"
    assert Path(download.path()).read_text() == "quarterly numbers\n"

    entries.filter(has_text="notes").get_by_test_id("files-open-dir").click()
    expect(dialog.get_by_test_id("files-path")).to_have_text("/notes")
    expect(entries).to_have_count(1)
    expect(entries.first).to_contain_text("todo.md")
    dialog.get_by_test_id("files-up").click()
    expect(dialog.get_by_test_id("files-path")).to_have_text("/")

    entries.filter(has_text="report.txt").get_by_test_id("files-delete").click()
    expect(dialog.get_by_test_id("files-message")).to_contain_text("Deleted report.txt")
    expect(entries).to_have_count(2)
    assert not (work / "report.txt").exists()
    assert outside.read_text() == "not yours"


def test_a_traversal_is_refused_with_a_clear_code(running_ui, tmp_path: Path):
    (tmp_path / "secret.txt").write_text("outside")
    with running_ui.ui_client() as client:
        for path in ("../secret.txt", str(tmp_path / "secret.txt"), "../../"):
            response = client.post("/api/download_work_dir_file", json={"path": path})
            assert response.status_code == 403, response.text
            assert response.json()["error"]["code"] == "path_outside_workdir"
