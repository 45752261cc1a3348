"""The work-folder endpoints over the HTTP app: list, upload, download, delete, and every
way out of the folder refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent import AgentConfig
from python.helpers import settings as settings_mod
from python.server.api import discover_handlers
from python.server.auth import AuthConfig
from python.server.runtime import Runtime
from run_ui import build_app

pytestmark = pytest.mark.unit


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path / "work"


@pytest.fixture
def client(tmp_path: Path, work: Path):
    settings = dict(settings_mod.DEFAULTS, workdir=str(work))
    runtime = Runtime(tmp_path / "usr", settings, AuthConfig())
    with TestClient(
        build_app(runtime, discover_handlers()), base_url="http://localhost"
    ) as test_client:
        test_client.headers["X-CSRF-Token"] = test_client.get("/api/csrf_token").json()["token"]
        test_client.runtime = runtime  # type: ignore[attr-defined]
        yield test_client


def _code(response) -> str:
    return response.json()["error"]["code"]


def _upload(client, path: str, *files: tuple[str, bytes], **extra):
    multipart = [("files", (name, data, "application/octet-stream")) for name, data in files]
    return client.post("/api/upload_work_dir_files", data={"path": path, **extra}, files=multipart)


def test_upload_list_download_delete(client, work):
    listed = client.post("/api/get_work_dir_files", json={}).json()
    assert (listed["path"], listed["parent"], listed["entries"]) == ("", None, [])
    assert Path(listed["root"]) == work.resolve()

    up = _upload(client, "docs", ("a.txt", b"alpha"), ("b b.md", b"# bee"))
    assert up.status_code == 200, up.text
    assert [u["path"] for u in up.json()["uploaded"]] == ["docs/a.txt", "docs/b b.md"]
    assert (work / "docs" / "b b.md").read_bytes() == b"# bee"

    root = client.get("/api/get_work_dir_files").json()
    assert [(e["name"], e["type"]) for e in root["entries"]] == [("docs", "dir")]
    docs = client.post("/api/get_work_dir_files", json={"path": "docs"}).json()
    assert docs["parent"] == ""
    assert [(e["name"], e["type"], e["size"]) for e in docs["entries"]] == [
        ("a.txt", "file", 5),
        ("b b.md", "file", 5),
    ]

    down = client.get("/api/download_work_dir_file", params={"path": "docs/a.txt"})
    assert down.status_code == 200 and down.content == b"alpha"
    assert down.headers["content-disposition"].startswith("attachment")

    again = _upload(client, "docs", ("a.txt", b"replaced"))
    assert again.status_code == 200 and (work / "docs" / "a.txt").read_bytes() == b"replaced"
    assert not [p for p in (work / "docs").iterdir() if p.name.startswith(".")]

    gone = client.post("/api/delete_work_dir_file", json={"path": "docs/a.txt"})
    assert gone.status_code == 200 and gone.json()["deleted"] == "docs/a.txt"
    assert [e["name"] for e in gone.json()["entries"]] == ["b b.md"]
    folder = client.post("/api/delete_work_dir_file", json={"path": "docs"})
    assert folder.status_code == 200 and not (work / "docs").exists()


@pytest.mark.parametrize(
    "path", ["..", "../", "../secret.txt", "docs/../../secret.txt", "./../secret.txt"]
)
def test_dot_dot_is_refused_everywhere(client, work, path):
    (work.parent / "secret.txt").write_text("outside")
    (work / "docs").mkdir(parents=True)
    assert _code(client.post("/api/get_work_dir_files", json={"path": path})) == (
        "path_outside_workdir"
    )
    for name in ("download_work_dir_file", "delete_work_dir_file"):
        response = client.post(f"/api/{name}", json={"path": path})
        assert response.status_code == 403 and _code(response) == "path_outside_workdir"
    assert _code(_upload(client, path, ("x.txt", b"x"))) == "path_outside_workdir"
    assert (work.parent / "secret.txt").read_text() == "outside"
    assert not (work.parent / "x.txt").exists()


def test_absolute_paths_outside_are_refused_inside_accepted(client, work, tmp_path):
    (tmp_path / "secret.txt").write_text("outside")
    for path in (str(tmp_path / "secret.txt"), "/etc/passwd", "/"):
        response = client.post("/api/download_work_dir_file", json={"path": path})
        assert _code(response) == "path_outside_workdir", path
    work.mkdir(exist_ok=True)
    (work / "in.txt").write_text("inside")
    inside = client.post("/api/download_work_dir_file", json={"path": str(work / "in.txt")})
    assert inside.status_code == 200 and inside.content == b"inside"


def test_links_that_point_outside_are_refused(client, work, tmp_path):
    outside_dir = tmp_path / "elsewhere"
    outside_dir.mkdir()
    (outside_dir / "secret.txt").write_text("outside")
    work.mkdir(exist_ok=True)
    os.symlink(outside_dir / "secret.txt", work / "file-link")
    os.symlink(outside_dir, work / "dir-link")
    (work / "real.txt").write_text("inside")
    os.symlink(work / "real.txt", work / "inner-link")

    rows = {e["name"]: e for e in client.post("/api/get_work_dir_files", json={}).json()["entries"]}
    assert (rows["file-link"]["type"], rows["file-link"]["outside"]) == ("link", True)
    assert (rows["dir-link"]["type"], rows["dir-link"]["outside"]) == ("link", True)
    assert (rows["inner-link"]["type"], rows["inner-link"]["link"]) == ("file", True)

    for name, path in [
        ("download_work_dir_file", "file-link"),
        ("download_work_dir_file", "dir-link/secret.txt"),
        ("get_work_dir_files", "dir-link"),
        ("delete_work_dir_file", "dir-link/secret.txt"),
    ]:
        assert _code(client.post(f"/api/{name}", json={"path": path})) == "path_outside_workdir"
    assert _code(_upload(client, "dir-link", ("x.txt", b"x"))) == "path_outside_workdir"
    assert _code(_upload(client, "", ("file-link", b"overwrite"))) == "path_outside_workdir"
    assert (outside_dir / "secret.txt").read_text() == "outside"
    assert not (outside_dir / "x.txt").exists()

    inner = client.post("/api/download_work_dir_file", json={"path": "inner-link"})
    assert inner.content == b"inside"
    # deleting a link removes the link, never what it points to
    assert client.post("/api/delete_work_dir_file", json={"path": "dir-link"}).status_code == 200
    assert not (work / "dir-link").exists() and (outside_dir / "secret.txt").exists()


def test_upload_keeps_only_the_file_name(client, work, tmp_path):
    response = _upload(client, "", ("../../evil.txt", b"x"))
    assert response.status_code == 200, response.text
    assert response.json()["uploaded"][0]["path"] == "evil.txt"
    assert (work / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()


def test_clear_errors(client, work):
    work.mkdir(exist_ok=True)
    (work / "f.txt").write_text("x")
    (work / "d").mkdir()
    cases = [
        ("get_work_dir_files", {"path": "missing"}, 404, "file_not_found"),
        ("get_work_dir_files", {"path": "f.txt"}, 400, "not_a_directory"),
        ("download_work_dir_file", {"path": "d"}, 400, "is_a_directory"),
        ("download_work_dir_file", {}, 400, "bad_request"),
        ("delete_work_dir_file", {"path": "missing"}, 404, "file_not_found"),
        ("delete_work_dir_file", {"path": "."}, 400, "bad_request"),
        ("get_work_dir_files", {"context": "nope"}, 404, "context_not_found"),
        ("download_work_dir_file", {"path": "x" * 300}, 400, "bad_request"),
        ("get_work_dir_files", {"path": "a/" * 2100}, 400, "bad_request"),
        ("delete_work_dir_file", {"path": "d/" + "y" * 256}, 400, "bad_request"),
    ]
    for name, body, status, code in cases:
        response = client.post(f"/api/{name}", json=body)
        assert (response.status_code, _code(response)) == (status, code), (name, body)
    no_files = client.post("/api/upload_work_dir_files", data={"path": ""})
    assert _code(no_files) == "bad_request"


def test_a_chat_uses_its_own_work_folder(client, tmp_path):
    own = tmp_path / "own-work"
    config = AgentConfig.from_settings(dict(settings_mod.DEFAULTS, workdir=str(own)))
    chats = client.runtime.chats
    ctx = client.portal.call(lambda: chats.create(config=config))  # on the server's loop
    response = _upload(client, "", ("c.txt", b"chat"), context=ctx.id)
    assert response.status_code == 200, response.text
    assert (own / "c.txt").read_bytes() == b"chat"
    listed = client.post("/api/get_work_dir_files", json={"context": ctx.id}).json()
    assert [e["name"] for e in listed["entries"]] == ["c.txt"]
