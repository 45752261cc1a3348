"""Notifications (#23): the manager, upstream's notification_* endpoints, the poll's part,
and the notify_user tool honouring detail, priority and display time."""

from __future__ import annotations

import pytest

from python.helpers import notifications
from python.helpers.notifications import HIGH, MAX_ITEMS, NORMAL, NotificationManager
from tests.support.model_server import model_server as model_server
from tests.unit.test_api_chat_endpoints import client as client

pytestmark = pytest.mark.unit


def test_the_manager_keeps_the_newest_items_and_an_update_index():
    manager = NotificationManager()
    first = manager.add("one")
    assert manager.version == 1 and manager.output(0)[0]["id"] == first.id
    for i in range(MAX_ITEMS + 5):
        manager.add(f"n{i}")
    kept = manager.history()
    assert len(kept) == MAX_ITEMS and kept[-1]["message"] == f"n{MAX_ITEMS + 4}"
    version = manager.version
    assert manager.output(version) == []
    newest = kept[-1]["id"]
    assert manager.mark_read([newest]) == 1 and manager.mark_read([newest]) == 0
    assert [n["id"] for n in manager.output(version)] == [newest]
    assert manager.output(version)[0]["read"] is True
    # an id updates that notification in place, unread again
    again = manager.add("changed", id=newest, type="warning")
    assert again.no == kept[-1]["no"] and again.read is False
    assert len(manager.history()) == MAX_ITEMS
    guid = manager.guid
    manager.clear()
    assert manager.guid != guid and manager.history() == [] and manager.version == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 3.0), ("soon", 3.0), (-1, 3.0), (float("nan"), 3.0), (True, 3.0), (0, 0.0), (7, 7.0)],
)
def test_a_bad_display_time_becomes_three_seconds(value, expected):
    assert notifications.display_time_of(value) == expected


def test_types_and_priorities_are_checked():
    assert notifications.check_priority("high") == HIGH
    assert notifications.check_priority(None) == NORMAL
    for bad in (15, "urgent", True):
        with pytest.raises(notifications.NotificationError):
            notifications.check_priority(bad)
    with pytest.raises(notifications.NotificationError):
        notifications.check_type("shout")


def _poll(client, since: int = 0) -> dict:
    response = client.post("/api/poll", json={"notifications_from": since})
    assert response.status_code == 200, response.text
    return response.json()


def test_endpoints_create_list_mark_read_and_clear(client):
    empty = _poll(client)
    assert empty["notifications"] == [] and empty["notifications_version"] == 0
    created = client.post(
        "/api/notification_create",
        json={
            "message": "Backup done",
            "title": "Backup",
            "type": "success",
            "priority": 20,
            "detail": "<b>3</b> files",
            "display_time": "bad",
            "group": "backup",
        },
    )
    assert created.status_code == 200, created.text
    body = created.json()
    assert body["success"] is True and body["notification_id"]
    snapshot = _poll(client)
    [item] = snapshot["notifications"]
    assert item["id"] == body["notification_id"]
    assert (item["type"], item["priority"], item["title"], item["detail"]) == (
        "success",
        20,
        "Backup",
        "<b>3</b> files",
    )
    assert item["display_time"] == 3.0 and item["read"] is False and item["group"] == "backup"
    version = snapshot["notifications_version"]
    assert _poll(client, version)["notifications"] == []

    history = client.post("/api/notifications_history", json={}).json()
    assert history["count"] == 1 and history["guid"] == snapshot["notifications_guid"]

    marked = client.post("/api/notifications_mark_read", json={"notification_ids": [item["id"]]})
    assert marked.status_code == 200 and marked.json()["marked_count"] == 1
    [changed] = _poll(client, version)["notifications"]
    assert changed["read"] is True
    client.post("/api/notification_create", json={"message": "two"})
    assert (
        client.post("/api/notifications_mark_read", json={"mark_all": True}).json()["marked_count"]
        == 1
    )

    cleared = client.post("/api/notifications_clear", json={})
    assert cleared.status_code == 200 and cleared.json()["success"] is True
    after = _poll(client, version)
    assert after["notifications_guid"] != snapshot["notifications_guid"]
    assert after["notifications"] == []
    assert client.post("/api/notifications_history", json={}).json()["count"] == 0


@pytest.mark.parametrize(
    ("endpoint", "body"),
    [
        ("notification_create", {}),
        ("notification_create", {"message": "x", "type": "shout"}),
        ("notification_create", {"message": "x", "priority": 99}),
        ("notifications_mark_read", {}),
        ("notifications_mark_read", {"notification_ids": [1]}),
        ("notifications_mark_read", {"notification_ids": "abc"}),
    ],
)
def test_bad_input_is_a_bad_request(client, endpoint, body):
    response = client.post(f"/api/{endpoint}", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "bad_request"


def test_notify_user_honours_detail_priority_and_timeout(client, model_server):
    model_server.tool(
        "notify_user",
        {
            "message": "Half way",
            "title": "Progress",
            "detail": "<i>50%</i>",
            "type": "warning",
            "priority": 10,
            "timeout": 12,
        },
    )
    model_server.tool("notify_user", {"message": "Default priority"})
    model_server.tool("notify_user", {"message": "x", "type": "shout"})
    model_server.tool("response", {"text": "done"})
    answer = client.post("/api/message", json={"text": "go"})
    assert answer.status_code == 200, answer.text
    items = client.post("/api/notifications_history", json={}).json()["notifications"]
    assert [(n["message"], n["type"], n["priority"], n["display_time"]) for n in items] == [
        ("Half way", "warning", 10, 12.0),
        ("Default priority", "info", 20, 30.0),
    ]
    assert items[0]["detail"] == "<i>50%</i>" and items[0]["title"] == "Progress"
    # the refused one told the model why
    assert "Unknown notification type" in str(model_server.requests[3]["messages"])


def test_a_held_chat_is_marked_in_the_poll_and_its_run_rows_name_it(client, model_server):
    from tests.support.model_server import ScriptedFailure

    model_server.respond_with(lambda body: ScriptedFailure(500, "provider down"))
    held = client.post("/api/message", json={"text": "hello"})
    ctx_id = client.post("/api/poll", json={}).json()["contexts"][0]["id"]
    other = client.post("/api/chat_create", json={}).json()["ctxid"]
    snapshot = client.post("/api/poll", json={"context": other}).json()
    rows = {row["id"]: row for row in snapshot["contexts"]}
    assert rows[ctx_id]["held"] is True and rows[ctx_id]["held_reason"] == "model_failed", held
    assert rows[other]["held"] is False and rows[other]["held_reason"] is None
    name = rows[ctx_id]["name"] or f"Chat {rows[ctx_id]['no']}"
    [run] = client.post("/api/durable_runs", json={"status": "needs_attention"}).json()["runs"]
    assert run["context_id"] == ctx_id and run["context_name"] == name
    detail = client.post("/api/durable_run", json={"run_id": run["run_id"]}).json()["run"]
    assert detail["context_name"] == name


def test_an_idle_chat_reports_no_progress(client, model_server):
    model_server.tool("response", {"text": "done"})
    ctx_id = client.post("/api/message", json={"text": "hi"}).json()["context"]
    snapshot = client.post("/api/poll", json={"context": ctx_id}).json()
    assert snapshot["running"] is False
    assert (snapshot["log_progress"], snapshot["log_progress_active"]) == ("", False)
