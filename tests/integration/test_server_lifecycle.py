"""Start-up, extra arguments, and a clean stop on SIGTERM even with a chat running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.integration._helpers import wait_until
from tests.support.ui_server import ui_env_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_stops_an_idle_server_with_exit_code_0(ui_server):
    ui_server.start(timeout=60)
    assert httpx.get(f"{ui_server.url}/api/health", timeout=5).json()["ok"] is True
    assert ui_server.stop() == 0
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{ui_server.url}/api/health", timeout=2)


def test_sigterm_cancels_a_running_chat_and_exits_0(ui_server, model_server, tmp_path):
    ui_server.env.update(ui_env_for(model_server))
    ui_server.start(timeout=60)
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": "sleep 120"})
    with ui_server.ui_client() as client:
        sent = client.post("/api/message_async", json={"text": "sleep for a while"})
        assert sent.status_code == 200, sent.text
        ctx = sent.json()["context"]

        def running() -> bool:
            snapshot = client.post("/api/poll", json={"context": ctx, "log_from": 0}).json()
            return snapshot["running"] and any(
                item["type"] in ("code_exe", "tool") for item in snapshot["logs"]
            )

        wait_until(running, what="the sleep command to start")
    code = ui_server.stop(timeout=15)
    assert code == 0, ui_server.output()[-3000:]


def test_extra_key_value_arguments_are_accepted(ui_server):
    ui_server.extra_args = ["--dockerized=true", "--development", "--some_agent_field=x"]
    ui_server.start(timeout=60)
    assert httpx.get(f"{ui_server.url}/api/health", timeout=5).status_code == 200
    assert ui_server.stop() == 0
    assert "dockerized" in ui_server.output()


def test_sigterm_answers_a_waiting_api_message_and_exits_0(running_ui, model_server):
    import threading

    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": "sleep 120"})
    result: dict = {}

    def call() -> None:
        try:
            result["response"] = running_ui.api_message("sleep please")
        except httpx.HTTPError as exc:
            result["error"] = exc

    caller = threading.Thread(target=call)
    caller.start()
    with running_ui.ui_client() as client:

        def sleeping() -> bool:
            contexts = client.post("/api/poll", json={}).json()["contexts"]
            if not contexts:
                return False
            snapshot = client.post("/api/poll", json={"context": contexts[0]["id"]}).json()
            return any(item["type"] == "tool" for item in snapshot["logs"])

        wait_until(sleeping, what="the sleep command to start")
    assert running_ui.stop(timeout=15) == 0, running_ui.output()[-3000:]
    caller.join(10)
    assert not caller.is_alive()
    response = result.get("response")
    assert response is not None, result
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "chat_stopped"


def test_a_port_taken_between_probing_and_binding_is_tried_again(ui_server, monkeypatch):
    """Test support: another process may take the probed port before run_ui.py binds it."""
    import socket

    from tests.support import ui_server as support

    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = [taken.getsockname()[1]]
    real_free_port = support.free_port
    monkeypatch.setattr(support, "free_port", lambda: ports.pop() if ports else real_free_port())
    try:
        url = ui_server.start()
        assert ui_server.port != taken.getsockname()[1]
        assert httpx.get(f"{url}/api/health", timeout=5).status_code == 200
        assert b"address already in use" in ui_server.log_path.read_bytes()
    finally:
        taken.close()
    assert ui_server.stop() == 0


_GC_PROBE = """
import gc, runpy, sys
import uvicorn

class Probe:  # records the collector's state when run_ui imports the durable runtime
    def find_spec(self, name, path=None, target=None):
        if name == "python.server.runtime":
            print("importing:", gc.isenabled(), flush=True)
        return None

def serve(self, sockets=None):  # instead of serving: the state when uvicorn would start
    print("serving:", gc.isenabled(), gc.get_freeze_count() > 0, flush=True)

sys.meta_path.insert(0, Probe())
uvicorn.Server.run = serve
sys.argv = ["run_ui.py", "--port", "5999"]
runpy.run_path("run_ui.py", run_name="__main__")
"""


def test_the_script_pauses_the_garbage_collector_only_while_it_loads(tmp_path):
    """Run as a script, the collector is off while the modules load and on again (with the
    start-up objects frozen) before uvicorn starts; imported, run_ui leaves it alone."""
    env = {**os.environ, "A0_USR_DIR": str(tmp_path / "usr")}
    probe = subprocess.run(
        [sys.executable, "-c", _GC_PROBE], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert "importing: False" in probe.stdout, probe.stdout + probe.stderr[-2000:]
    assert "serving: True True" in probe.stdout, probe.stdout + probe.stderr[-2000:]
    imported = subprocess.run(
        [sys.executable, "-c", "import gc, run_ui; print(gc.isenabled(), gc.get_freeze_count())"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout.split() == ["True", "0"]
