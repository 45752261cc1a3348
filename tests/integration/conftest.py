"""Fixtures for system tests: the scripted model and a real run_ui.py process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.model_server import ScriptedModel
from tests.support.model_server import model_server as model_server
from tests.support.ui_server import UiServer, ui_env_for
from tests.support.ui_server import ui_server as ui_server


@pytest.fixture
def running_ui(ui_server: UiServer, model_server: ScriptedModel) -> Iterator[UiServer]:
    """run_ui.py started against the scripted model, with API token 'test-token'."""
    ui_server.env.update(ui_env_for(model_server))
    ui_server.start()
    yield ui_server
    code = ui_server.stop()
    assert code == 0, f"run_ui.py did not stop cleanly ({code}):\n{ui_server.output()[-4000:]}"
