"""Fixtures for system tests: the scripted model and a real run_ui.py process."""

from __future__ import annotations

from tests.support.model_server import model_server as model_server
from tests.support.ui_server import running_ui as running_ui
from tests.support.ui_server import ui_server as ui_server
