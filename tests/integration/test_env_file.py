"""run_ui.py configured only through usr/.env, as upstream allows: WEB_UI_PORT/WEB_UI_HOST
choose the address, A0_SET_* give defaults, and a value saved in Settings wins over them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.model_server import ScriptedModel
from tests.support.ui_server import SLOW_START, UiServer

pytestmark = pytest.mark.integration


class DotenvServer(UiServer):
    """run_ui.py without --host/--port and without A0_SET_* in its environment."""

    def __init__(self, usr: Path, model: ScriptedModel) -> None:
        super().__init__(usr)
        self.model = model

    def command(self, python: Path) -> list[str]:
        lines = [
            f"WEB_UI_PORT={self.port}",
            "WEB_UI_HOST=127.0.0.1",
            "API_KEY_OTHER=sk-dotenv-0123456789",
            "A0_SET_mcp_server_token=dotenv-token",
            "A0_SET_chat_model_provider=other",
            f"A0_SET_chat_model_api_base={self.model.url}",
            "A0_SET_chat_model_name=model-from-dotenv",
        ]
        (self.usr_dir / ".env").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return [str(python), "run_ui.py"]


def test_address_and_defaults_from_usr_dotenv_and_saved_settings_win(tmp_path, model_server):
    server = DotenvServer(tmp_path / "usr", model_server)
    model_server.tool("response", {"text": "one"})
    model_server.tool("response", {"text": "two"})
    try:
        server.start(timeout=SLOW_START)  # healthy on WEB_UI_PORT from usr/.env
        first = server.api_message("hello", token="dotenv-token")
        assert first.status_code == 200, first.text
        assert model_server.requests[0]["model"] == "model-from-dotenv"
        with server.ui_client() as client:
            saved = client.post("/api/settings_set", json={"chat_model_name": "saved-model"})
            assert saved.status_code == 200, saved.text
        second = server.api_message("again", token="dotenv-token")
        assert second.status_code == 200, second.text
        assert model_server.requests[1]["model"] == "saved-model"
    finally:
        code = server.stop()
    assert code == 0

    # after a restart the saved value still wins over the A0_SET_ default in usr/.env
    model_server.tool("response", {"text": "three"})
    try:
        server.start(timeout=SLOW_START)
        third = server.api_message("and again", token="dotenv-token")
        assert third.status_code == 200, third.text
        assert model_server.requests[2]["model"] == "saved-model"
    finally:
        server.stop()
