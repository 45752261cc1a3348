"""Playwright in Debian's Chromium (never `playwright install`), plus the server fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.model_server import model_server as model_server
from tests.support.ui_server import running_ui as running_ui
from tests.support.ui_server import ui_server as ui_server

CHROMIUM = Path("/usr/bin/chromium")
expect.set_options(timeout=30_000)  # CI machines can be slow; a real failure still fails


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture(scope="session")
def base_url() -> None:
    """Replaces pytest-base-url's fixture (a deprecated instance-method fixture under pytest 9)."""
    return None
