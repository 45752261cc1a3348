"""The SSH settings (a password kept like API keys) and the local ``.remote`` pointer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.adapters.shell import ShellReceipts, call_args_digest
from python.helpers import settings
from python.helpers.ssh_shell import target_from_settings

pytestmark = pytest.mark.unit


def test_upstream_defaults_and_the_key_file():
    d = settings.DEFAULTS
    assert (d["code_exec_ssh_enabled"], d["code_exec_ssh_addr"], d["code_exec_ssh_port"]) == (
        False,
        "localhost",
        55022,
    )
    assert (d["code_exec_ssh_user"], d["code_exec_ssh_pass"], d["code_exec_ssh_key_file"]) == (
        "root",
        "",
        "",
    )
    assert target_from_settings(dict(d), Path("/u")) is None


def test_the_ssh_password_lives_in_env_only(tmp_path):
    settings.save({"code_exec_ssh_enabled": True, "code_exec_ssh_pass": "pw-ssh-777"}, tmp_path)
    assert "pw-ssh-777" not in (tmp_path / "settings.json").read_text()
    assert "CODE_EXEC_SSH_PASSWORD='pw-ssh-777'" in (tmp_path / ".env").read_text()
    loaded = settings.load(tmp_path, environ={})
    assert loaded["code_exec_ssh_pass"] == "pw-ssh-777"
    view = settings.public_view(loaded, tmp_path, providers=[], environ={})
    assert "pw-ssh-777" not in json.dumps(view)
    assert view["secrets"]["code_exec_ssh_pass"] is True
    target = target_from_settings(loaded | {"code_exec_ssh_key_file": "ssh/id"}, tmp_path)
    assert target is not None and target.password == "pw-ssh-777"
    assert target.key_file == str(tmp_path / "ssh" / "id")
    assert "pw-ssh-777" not in repr(target)
    assert target.known_hosts == str(tmp_path / "ssh" / "known_hosts")


def test_a_port_must_be_positive(tmp_path):
    with pytest.raises(settings.SettingsError):
        settings.save({"code_exec_ssh_port": 0}, tmp_path)


def test_a_remote_pointer_is_never_read_as_never_started(tmp_path):
    receipts = ShellReceipts(tmp_path / "r")
    digest = call_args_digest({"code": "rm -rf build"})
    assert receipts.inspect("call-1", digest).status == "never_started"
    receipts.mark_remote("call-1", digest, {"ssh": {"host": "h", "port": 22}})
    verdict = receipts.inspect("call-1", digest)
    assert verdict.status == "unknown"
    assert verdict.detail["remote"]["ssh"]["host"] == "h"
    assert receipts.classify({"id": "call-1", "args": {"code": "rm -rf build"}}) == "unknown"
    with pytest.raises(Exception) as caught:
        receipts.mark_remote("call-1", digest, {})
    assert getattr(caught.value, "code", "") == "receipt_exists"
    receipts.discard("call-1")
    assert not list(receipts.folder.iterdir())
