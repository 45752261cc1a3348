"""edit_work_dir_file and rename_work_dir_file (upstream's endpoint names) over the HTTP app:
read and save text, rename in place, and every way out of the folder refused (#23)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from python.helpers import settings as settings_mod
from python.server.api import discover_handlers
from python.server.auth import AuthConfig
from python.server.runtime import Runtime
from run_ui import build_app

pytestmark = pytest.mark.unit


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "a.txt").write_text("alpha\n", encoding="utf-8")
    return folder


@pytest.fixture
def client(tmp_path: Path, work: Path):
    settings = dict(settings_mod.DEFAULTS, workdir=str(work))
    runtime = Runtime(tmp_path / "usr", settings, AuthConfig())
    with TestClient(build_app(runtime, discover_handlers()), base_url="http://localhost") as c:
        c.headers["X-CSRF-Token"] = c.get("/api/csrf_token").json()["token"]
        yield c


def _code(response) -> str:
    return response.json()["error"]["code"]


def test_read_then_save_a_text_file(client, work):
    read = client.post("/api/edit_work_dir_file", json={"path": "docs/a.txt"})
    assert read.status_code == 200, read.text
    assert read.json()["content"] == "alpha\n" and read.json()["path"] == "docs/a.txt"
    saved = client.post(
        "/api/edit_work_dir_file", json={"path": "docs/a.txt", "content": "beta ✓\n"}
    )
    assert saved.status_code == 200, saved.text
    assert saved.json()["saved"] == "docs/a.txt"
    assert [e["name"] for e in saved.json()["entries"]] == ["a.txt"]  # the folder's listing
    assert (work / "docs" / "a.txt").read_text(encoding="utf-8") == "beta ✓\n"
    new = client.post("/api/edit_work_dir_file", json={"path": "docs/new.md", "content": "#"})
    assert new.status_code == 200 and (work / "docs" / "new.md").read_text() == "#"


def test_edit_refusals(client, work, tmp_path):
    (work / "bin.dat").write_bytes(b"\xff\xfe\x00binary")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", work / "leak.txt")
    cases = [
        ({"path": "bin.dat"}, 400, "not_a_text_file"),
        ({"path": "docs"}, 400, "is_a_directory"),
        ({"path": "missing.txt"}, 404, "file_not_found"),
        ({"path": "nofolder/x.txt", "content": "x"}, 404, "file_not_found"),
        ({"path": "../secret.txt"}, 403, "path_outside_workdir"),
        ({"path": "leak.txt", "content": "x"}, 403, "path_outside_workdir"),
        ({"path": "docs/a.txt", "content": 5}, 400, "bad_request"),
        ({"path": ""}, 400, "bad_request"),
        ({"path": "big.txt", "content": "x" * (1024 * 1024 + 1)}, 413, "payload_too_large"),
    ]
    for body, status, code in cases:
        response = client.post("/api/edit_work_dir_file", json=body)
        assert (response.status_code, _code(response)) == (status, code), body
    assert (tmp_path / "secret.txt").read_text() == "outside"
    assert not (work / "big.txt").exists()


def test_rename_in_place(client, work):
    renamed = client.post(
        "/api/rename_work_dir_file", json={"path": "docs/a.txt", "newName": "b.txt"}
    )
    assert renamed.status_code == 200, renamed.text
    assert (renamed.json()["renamed"], renamed.json()["new_path"]) == ("docs/a.txt", "docs/b.txt")
    assert [e["name"] for e in renamed.json()["entries"]] == ["b.txt"]
    assert (work / "docs" / "b.txt").read_text() == "alpha\n"
    folder = client.post("/api/rename_work_dir_file", json={"oldPath": "docs", "newName": "d"})
    assert folder.status_code == 200, folder.text
    assert (work / "d" / "b.txt").is_file() and not (work / "docs").exists()


def test_rename_refusals(client, work):
    (work / "taken.txt").write_text("keep")
    cases = [
        ({"path": "docs/a.txt", "newName": "../../x"}, 400, "bad_request"),
        ({"path": "docs/a.txt", "newName": ".."}, 400, "bad_request"),
        ({"path": "docs/a.txt"}, 400, "bad_request"),
        ({"path": "", "newName": "x"}, 400, "bad_request"),
        ({"path": "docs/a.txt", "newName": "x", "action": "move"}, 400, "bad_request"),
        ({"path": "nope.txt", "newName": "x"}, 404, "file_not_found"),
        ({"path": "../outside", "newName": "x"}, 403, "path_outside_workdir"),
        ({"path": "docs", "newName": "taken.txt"}, 409, "file_exists"),
    ]
    for body, status, code in cases:
        response = client.post("/api/rename_work_dir_file", json=body)
        assert (response.status_code, _code(response)) == (status, code), body
    assert (work / "taken.txt").read_text() == "keep" and (work / "docs" / "a.txt").is_file()
