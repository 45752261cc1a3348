"""Small helpers for system tests: waiting on conditions and reading a chat's log."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.support.ui_server import UiServer


def wait_until(condition: Callable[[], Any], timeout: float = 60, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def chat_log(server: UiServer, context_id: str, token: str = "test-token") -> list[dict]:
    response = httpx.post(
        f"{server.url}/api/api_log_get",
        json={"context_id": context_id, "length": 1000},
        headers={"X-API-KEY": token},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()["log"]["items"]


def log_text(items: list[dict]) -> str:
    parts = []
    for item in items:
        parts += [str(item.get("type")), str(item.get("heading")), str(item.get("content"))]
        parts.append(str(item.get("kvps")))
    return "\n".join(parts)


def assert_healthy(server: UiServer) -> None:
    response = httpx.get(f"{server.url}/api/health", timeout=5)
    assert response.status_code == 200
    assert response.json()["ok"] is True


def request_text(request: dict) -> str:
    """All message contents of one model request, joined (for 'the model saw X' checks)."""
    parts = []
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content)
        parts.append(str(content))
    return "\n".join(parts)
