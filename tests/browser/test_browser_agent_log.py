"""The chat log shows browser_agent's steps with their screenshots, and the Recovery panel
shows the page and the screenshot taken before a held browser action (issue #21)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.integration._browser_support import ALLOW_PRIVATE, script
from tests.integration._durable_system import crashable as crashable
from tests.integration._helpers import wait_until
from tests.support.browser_site import browser_site as browser_site

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

TIMEOUT_MS = 60_000
PLAN = [
    {"action": "type", "index": 0, "text": "Alice"},
    {"action": "submit", "index": 0},
    {"action": "done", "response": "sent"},
]


LOADED = "img => img.complete && img.naturalWidth > 0"


def _shows_an_image(image) -> None:
    """The <img> (re-rendered by a refresh, so asked afresh each time) shows a picture."""
    expect(image).to_have_attribute("src", re.compile("^blob:"), timeout=TIMEOUT_MS)
    wait_until(lambda: image.evaluate(LOADED), timeout=60, what="the screenshot to load")


def test_browser_steps_show_in_the_chat_log_with_screenshots(
    page: Page, crashable, model_server, browser_site
):
    script(model_server, f"Open {browser_site.url}/form and send it as Alice", PLAN)
    server = crashable.start(**ALLOW_PRIVATE)
    assert server.api_message("send the order", input_id="ui-1").status_code == 200
    page.goto(server.url)
    page.get_by_test_id("chat-item").first.click()
    steps = page.get_by_test_id("log-browser")
    expect(steps).to_have_count(3, timeout=TIMEOUT_MS)
    expect(steps.nth(0)).to_contain_text("navigate")
    expect(steps.nth(2)).to_contain_text("submit")
    expect(steps.nth(2)).to_contain_text(f"{browser_site.url}/thanks")
    shots = page.get_by_test_id("browser-screenshot")
    expect(shots).to_have_count(3, timeout=TIMEOUT_MS)
    for i in range(3):
        _shows_an_image(shots.nth(i))
    crashable.stop()


def test_the_recovery_panel_shows_the_page_before_a_held_submit(
    page: Page, crashable, model_server, browser_site
):
    script(model_server, f"Open {browser_site.url}/form and send it as Alice", PLAN)
    crash = {**ALLOW_PRIVATE, "A0_CRASH_AT": "after_effect@2", "A0_CRASH_MATCH": "browser_act"}
    crashable.crash_during("send the order", "ui-2", **crash)
    server = crashable.start(**ALLOW_PRIVATE)
    page.goto(server.url)
    page.get_by_test_id("chat-item").first.click()
    expect(page.get_by_test_id("held-banner")).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_test_id("held-open").click()
    card = page.get_by_test_id("recovery-run")
    expect(card).to_have_count(1, timeout=TIMEOUT_MS)
    # each browser_act call keeps its evidence (type, submit); the held one is the submit
    expect(card.get_by_test_id("action-evidence")).to_have_count(2, timeout=TIMEOUT_MS)
    evidence = card.locator("details.uncertain").get_by_test_id("action-evidence")
    expect(evidence).to_contain_text(f"{browser_site.url}/form")
    expect(evidence).to_contain_text("submit")
    shot = evidence.get_by_test_id("evidence-screenshot")
    _shows_an_image(shot)
    assert browser_site.count == 1
    crashable.stop()
