"""Knowledge folders imported by a real server process (issue #19, point 6): at start-up
after the server serves (progress in /api/memory_status), again through import_knowledge
and knowledge_reindex; a changed file replaces its chunks, a removed file loses them, an
unchanged file is not embedded again, and a restart imports nothing twice."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.integration._helpers import wait_until
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = pytest.mark.integration


def embed_env(model, name: str = "scripted-embed") -> dict[str, str]:
    return {
        **ui_env_for(model),
        "A0_SET_embed_model_provider": "other",
        "A0_SET_embed_model_api_base": model.url,
        "A0_SET_embed_model_name": name,
    }


def status(server: UiServer) -> dict:
    response = httpx.get(
        f"{server.url}/api/memory_status", headers={"X-API-KEY": "test-token"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return response.json()


def imported(server: UiServer, runs: int) -> dict:
    def done():
        knowledge = status(server)["knowledge"]
        ok = knowledge.get("runs", 0) >= runs and knowledge.get("state") in ("done", "failed")
        return knowledge if ok else None

    return wait_until(done, timeout=90, what=f"knowledge import #{runs}")


def listing(client: httpx.Client) -> list[dict]:
    response = client.post("/api/memory_dashboard", json={"action": "search", "limit": 1000})
    assert response.status_code == 200, response.text
    return response.json()["memories"]


def by_source(memories: list[dict]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for memory in memories:
        found.setdefault(memory["source_path"], []).append(memory["content_full"])
    return {k: sorted(v) for k, v in found.items()}


def test_changed_and_removed_files_with_a_real_server(tmp_path: Path, model_server):
    usr = tmp_path / "usr"
    custom = usr / "knowledge" / "custom"
    (custom / "main").mkdir(parents=True)
    (custom / "solutions").mkdir(parents=True)
    (usr / "knowledge" / "default").mkdir(parents=True)
    (custom / "main" / "pets.md").write_text("# Pets\n\nThe cat is named Tiberius.\n")
    (custom / "solutions" / "fix.txt").write_text("Restart the router to fix the wifi.")
    (usr / "knowledge" / "default" / "people.csv").write_text("name,city\nAda,London\nLin,Oslo\n")
    (custom / "page.html").write_text(
        "<html><head><script>var hidden = 1;</script></head>"
        "<body><p>Visible words</p></body></html>"
    )
    server = UiServer(usr, env=embed_env(model_server))
    try:
        server.start(timeout=SLOW_START)
        first = imported(server, 1)
        assert first["state"] == "done", first
        assert (first["imported"], first["files_total"], first["errors"]) == (4, 4, [])
        with server.ui_client() as client:
            sources = by_source(listing(client))
        assert sources == {
            "usr/knowledge/custom/main/pets.md": ["# Pets\n\nThe cat is named Tiberius."],
            "usr/knowledge/custom/solutions/fix.txt": ["Restart the router to fix the wifi."],
            "usr/knowledge/default/people.csv": [
                "name: Ada\ncity: London",
                "name: Lin\ncity: Oslo",
            ],
            "usr/knowledge/custom/page.html": ["Visible words"],
        }
        areas = {m["source_file"]: m["area"] for m in listing_client(server)}
        assert areas["fix.txt"] == "solutions" and areas["pets.md"] == "main"

        # change one file, remove another, upload a third: one import does all three
        (custom / "main" / "pets.md").write_text("The dog is named Rex.\n")
        (custom / "solutions" / "fix.txt").unlink()
        embedded_before = len(model_server.embedded_texts)
        with server.ui_client() as client:
            response = client.post(
                "/api/import_knowledge",
                files={"files[]": ("notes.md", b"Meeting moved to Friday.", "text/markdown")},
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["filenames"] == ["notes.md"]
            assert (body["status"]["imported"], body["status"]["removed"]) == (2, 1)
            sources = by_source(listing(client))
        assert sources == {
            "usr/knowledge/custom/main/pets.md": ["The dog is named Rex."],
            "usr/knowledge/custom/main/notes.md": ["Meeting moved to Friday."],
            "usr/knowledge/default/people.csv": [
                "name: Ada\ncity: London",
                "name: Lin\ncity: Oslo",
            ],
            "usr/knowledge/custom/page.html": ["Visible words"],
        }
        # only the changed and the new file were embedded
        fresh = model_server.embedded_texts[embedded_before:]
        assert sorted(fresh) == ["Meeting moved to Friday.", "The dog is named Rex."]
        assert (custom / "main" / "notes.md").read_text() == "Meeting moved to Friday."

        # the chunks of a file are found by search, with their source
        with server.ui_client() as client:
            response = client.post(
                "/api/memory_dashboard",
                json={"action": "search", "search": "dog named Rex", "threshold": 0.7},
            )
            assert response.status_code == 200, response.text
            hits = response.json()["memories"]
            assert hits[0]["source_file"] == "pets.md" and hits[0]["knowledge_source"] is True
            path = client.post("/api/knowledge_path_get", json={}).json()
            assert path["ok"] is True and path["absolute_path"] == str(custom.resolve())

        assert server.stop() == 0
        # a restart imports nothing again and duplicates nothing
        before = len(model_server.embedded_texts)
        server.start(timeout=SLOW_START)
        again = imported(server, 1)
        assert (again["imported"], again["unchanged"], again["removed"]) == (0, 4, 0)
        assert len(model_server.embedded_texts) == before
        assert len(listing_client(server)) == 5
    finally:
        server.kill()


def listing_client(server: UiServer) -> list[dict]:
    with server.ui_client() as client:
        return listing(client)


def test_bad_uploads_and_actions_are_refused_with_codes(running_ui):
    with running_ui.ui_client() as client:
        response = client.post(
            "/api/import_knowledge", files={"files[]": ("tool.exe", b"MZ", "application/x")}
        )
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "bad_request"
        response = client.post("/api/import_knowledge", json={})
        assert response.json()["error"]["code"] == "bad_request"
        response = client.post("/api/memory_dashboard", json={"action": "explode"})
        assert (response.status_code, response.json()["error"]["field"]) == (400, "action")
        response = client.post(
            "/api/memory_dashboard",
            json={"action": "update", "original": {"id": "nosuchid00"}, "edited": {}},
        )
        assert (response.status_code, response.json()["error"]["code"]) == (
            404,
            "memory_not_found",
        )


def test_a_new_embedding_model_re_embeds_in_the_background(tmp_path: Path, model_server):
    usr = tmp_path / "usr"
    (usr / "knowledge" / "custom" / "main").mkdir(parents=True)
    (usr / "knowledge" / "custom" / "main" / "pets.md").write_text("The cat is named Tiberius.")
    (usr / "knowledge" / "custom" / "main" / "car.md").write_text("The car is a blue estate.")
    (usr / "settings.json").write_text('{"embed_model_name": "embed-a"}')
    env = embed_env(model_server)
    del env["A0_SET_embed_model_name"]  # the name comes from settings.json (settings_set)
    server = UiServer(usr, env=env)

    def search(client: httpx.Client) -> list[str]:
        response = client.post(
            "/api/memory_dashboard",
            json={"action": "search", "search": "cat named Tiberius", "threshold": 0.8},
        )
        assert response.status_code == 200, response.text
        return [m["source_file"] for m in response.json()["memories"]]

    try:
        server.start(timeout=SLOW_START)
        imported(server, 1)
        assert status(server)["embedding_model"] == "other/embed-a"
        model_server.fail_embeddings(400, "scripted refusal")  # the new model fails once
        with server.ui_client() as client:
            response = client.post(
                "/api/settings_set",
                json={"embed_model_name": "embed-b", "embed_model_kwargs": {"dimensions": 48}},
            )
            assert response.status_code == 200, response.text
            failed = wait_until(
                lambda: (s := status(server))["reembed"].get("state") == "failed" and s,
                timeout=60,
                what="the re-embed to fail",
            )
            # until the re-embed is done, search embeds with the old model and finds the
            # old vectors; the status says so
            assert failed["embedding_model"] == "other/embed-b"
            assert failed["search_model"] == "other/embed-a"
            assert "scripted refusal" in failed["reembed"]["error"]
            assert search(client) == ["pets.md"]
            assert model_server.embedding_requests[-1]["model"] == "embed-a"
        assert server.stop() == 0

        # after a restart the re-embed runs again and finishes
        server.start(timeout=SLOW_START)
        done = wait_until(
            lambda: (s := status(server))["reembed"].get("state") == "done" and s,
            timeout=90,
            what="the re-embed to finish",
        )
        assert done["search_model"] == "other/embed-b"
        assert done["reembed"]["moved"] == 2
        with server.ui_client() as client:
            assert search(client) == ["pets.md"]
            assert model_server.embedding_requests[-1]["model"] == "embed-b"
            models = {m["model"] for m in listing(client)}
        assert models == {"other/embed-b"}
        assert len(model_server.embedding_requests[-1]["input"]) == 1
    finally:
        server.kill()
