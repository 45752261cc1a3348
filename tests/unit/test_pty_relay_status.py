"""``pty_relay.py --status``: what a restarted server reads about a terminal left on a host."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from durability.adapters import pty_relay


def test_an_empty_inbox_has_no_relay(tmp_path):
    assert pty_relay.status(str(tmp_path)) == {
        "relay": None,
        "alive": False,
        "command": None,
        "done": False,
    }


def test_a_recorded_pid_that_is_not_a_relay_is_not_alive(tmp_path):
    (tmp_path / "relay.json").write_text(json.dumps({"pid": os.getpid(), "shell_pid": 1}))
    found = pty_relay.status(str(tmp_path))
    assert found["relay"] == {"pid": os.getpid(), "shell_pid": 1}
    assert found["alive"] is False  # this test process is alive, but it is not a relay


def test_the_command_is_done_once_its_exit_marker_exists(tmp_path):
    exit_file = tmp_path / "c1.exit"
    command = {"call_id": "c1", "out": str(tmp_path / "c1.out"), "exit": str(exit_file)}
    (tmp_path / "command.json").write_text(json.dumps(command))
    assert pty_relay.status(str(tmp_path))["done"] is False
    exit_file.write_text("{}")
    assert pty_relay.status(str(tmp_path))["done"] is True


def test_the_status_mode_prints_one_json_line_and_bad_arguments_are_refused(tmp_path):
    script = pty_relay.__file__
    done = subprocess.run(
        [sys.executable, script, "--status", str(tmp_path)], capture_output=True, check=True
    )
    assert json.loads(done.stdout) == pty_relay.status(str(tmp_path))
    bad = subprocess.run([sys.executable, script, "--status"], capture_output=True)
    assert bad.returncode == 2 and b"usage" in bad.stderr
