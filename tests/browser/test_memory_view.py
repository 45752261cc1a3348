"""The Memory view in a real browser (issue #19, point 7): knowledge chunks listed with
their source, filter by area, search by meaning, edit, delete with confirmation."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.support.ui_server import SLOW_START, ui_env_for

pytestmark = pytest.mark.browser


def _memories(client) -> list[dict]:
    response = client.post("/api/memory_dashboard", json={"action": "search", "limit": 100})
    assert response.status_code == 200, response.text
    return response.json()["memories"]


def test_memory_view_searches_filters_edits_and_deletes(page: Page, ui_server, model_server):
    custom = ui_server.usr_dir / "knowledge" / "custom"
    (custom / "main").mkdir(parents=True)
    (custom / "solutions").mkdir(parents=True)
    (custom / "main" / "pets.md").write_text("The cat is named Tiberius.")
    (custom / "main" / "car.md").write_text("The car is a blue estate.")
    (custom / "solutions" / "wifi.txt").write_text("Restart the router to fix the wifi.")
    ui_server.env.update(ui_env_for(model_server))
    ui_server.env.update(
        {
            "A0_SET_embed_model_provider": "other",
            "A0_SET_embed_model_api_base": model_server.url,
            "A0_SET_embed_model_name": "scripted-embed",
        }
    )
    ui_server.start(timeout=SLOW_START)

    page.goto(ui_server.url)
    page.get_by_test_id("memory-open").click()
    dialog = page.get_by_test_id("memory-dialog")
    expect(dialog.get_by_test_id("memory-status")).to_contain_text("knowledge: 3 imported")
    dialog.get_by_test_id("memory-search-go").click()  # the list as it is after the import
    rows = dialog.get_by_test_id("memory-row")
    expect(rows).to_have_count(3)
    expect(dialog.get_by_test_id("memory-status")).to_contain_text("search: sqlite-vec")
    expect(dialog.get_by_test_id("memory-source")).to_have_count(3)
    expect(dialog.get_by_test_id("memory-list")).to_contain_text(
        "usr/knowledge/custom/solutions/wifi.txt"
    )

    # filter by area
    dialog.get_by_test_id("memory-area").select_option("solutions")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Restart the router")
    dialog.get_by_test_id("memory-area").select_option("")
    expect(rows).to_have_count(3)

    # search by meaning: the best match first
    dialog.get_by_test_id("memory-search").fill("cat named Tiberius")
    dialog.get_by_test_id("memory-search-go").click()
    expect(rows.first.get_by_test_id("memory-text")).to_have_text("The cat is named Tiberius.")
    expect(rows.first).to_contain_text("relevance")

    # edit the first hit: new text, new area
    rows.first.get_by_test_id("memory-edit").click()
    dialog.get_by_test_id("memory-edit-text").fill("The cat is named Tiberius the Second.")
    dialog.get_by_test_id("memory-edit-area").select_option("fragments")
    dialog.get_by_test_id("memory-edit-save").click()
    expect(dialog.get_by_test_id("memory-message")).to_contain_text("saved")
    with ui_server.ui_client() as client:
        edited = [m for m in _memories(client) if m["source_file"] == "pets.md"]
    assert [(m["content_full"], m["area"]) for m in edited] == [
        ("The cat is named Tiberius the Second.", "fragments")
    ]

    # delete: Cancel keeps it, Delete removes it
    dialog.get_by_test_id("memory-search").fill("")
    dialog.get_by_test_id("memory-area").select_option("solutions")
    # the list before the change may also have one row (the search's hit): wait for this one
    expect(dialog.get_by_test_id("memory-list")).not_to_have_attribute("aria-busy", "true")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Restart the router")
    rows.first.get_by_test_id("memory-delete").click()
    confirm = page.get_by_test_id("confirm-dialog")
    expect(confirm.get_by_test_id("confirm-text")).to_contain_text("wifi.txt")
    confirm.get_by_test_id("confirm-cancel").click()
    expect(rows).to_have_count(1)
    rows.first.get_by_test_id("memory-delete").click()
    confirm.get_by_test_id("confirm-ok").click()
    expect(dialog.get_by_test_id("memory-message")).to_contain_text("deleted")
    expect(dialog.get_by_test_id("memory-list")).to_contain_text("No memories yet.")
    with ui_server.ui_client() as client:
        left = sorted(m["source_file"] for m in _memories(client))
    assert left == ["car.md", "pets.md"]
