"""Failed logins and API keys are limited per client address (#17, point 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from python.server import rate_limits
from python.server.api import ApiHandler
from python.server.auth import AuthConfig
from python.server.rate_limits import FailureLimit
from python.server.runtime import Runtime
from run_ui import build_app

pytestmark = pytest.mark.unit


class External(ApiHandler):
    requires_auth = False
    requires_csrf = False
    requires_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        return {"ok": True}


def _app(tmp_path: Path):
    runtime = Runtime(tmp_path, {"mcp_server_token": "tok"}, AuthConfig.from_password("ann", "pw"))
    return build_app(runtime, {"external": External})


def _client(app, address: str) -> TestClient:
    return TestClient(app, base_url="http://localhost", client=(address, 5555))


def _login(client: TestClient, password: str):
    return client.post(
        "/login", data={"username": "ann", "password": password}, follow_redirects=False
    )


def test_300_wrong_logins_get_429_then_even_the_right_password_waits(tmp_path):
    app = _app(tmp_path)
    with _client(app, "203.0.113.5") as attacker, _client(app, "198.51.100.8") as other:
        statuses = [_login(attacker, f"guess-{i}").status_code for i in range(300)]
        assert statuses[: rate_limits.LOGIN_BURST] == [303] * rate_limits.LOGIN_BURST
        assert set(statuses[rate_limits.LOGIN_BURST :]) == {429}
        refused = _login(attacker, "pw")
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_requests"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert refused.json()["error"]["retry_after"] == int(refused.headers["Retry-After"])
        assert "a0_session" not in refused.headers.get("set-cookie", "")
        welcome = _login(other, "pw")  # another address is not affected
        assert welcome.status_code == 303 and welcome.headers["location"] == "/"


def test_wrong_api_keys_get_429_and_another_client_is_unaffected(tmp_path):
    app = _app(tmp_path)
    with _client(app, "203.0.113.5") as attacker, _client(app, "198.51.100.8") as other:
        wrong = [
            attacker.post("/api/external", json={}, headers={"X-API-KEY": f"k{i}"}).status_code
            for i in range(300)
        ]
        assert wrong[: rate_limits.API_KEY_BURST] == [401] * rate_limits.API_KEY_BURST
        assert set(wrong[rate_limits.API_KEY_BURST :]) == {429}
        right = attacker.post("/api/external", json={}, headers={"X-API-KEY": "tok"})
        assert right.status_code == 429 and int(right.headers["Retry-After"]) >= 1
        ok = other.post("/api/external", json={}, headers={"X-API-KEY": "tok"})
        assert ok.status_code == 200


def test_the_client_behind_a_trusted_proxy_is_the_forwarded_one(tmp_path):
    app = _app(tmp_path)
    with _client(app, "127.0.0.1") as proxy:  # FORWARDED_ALLOW_IPS' default
        proxy.headers["X-Forwarded-For"] = "203.0.113.5"
        for i in range(rate_limits.LOGIN_BURST):
            assert _login(proxy, f"g{i}").status_code == 303
        assert _login(proxy, "x").status_code == 429
        proxy.headers["X-Forwarded-For"] = "198.51.100.8"  # another client of the proxy
        assert _login(proxy, "pw").status_code == 303


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_bucket_refills_and_only_failures_take_tokens():
    clock = Clock()
    limit = FailureLimit(3, 6.0, clock=clock)  # one token every 10 s
    assert limit.retry_after("a") == 0
    assert [limit.take("a") for _ in range(4)] == [0, 0, 0, 10]  # the fourth is refused
    limit.give_back("a")  # a success costs nothing
    assert limit.take("a") == 0 and limit.take("a") == 10
    clock.now = 4.0
    assert limit.retry_after("a") == 6
    clock.now = 10.0
    assert limit.retry_after("a") == 0
    assert limit.take("a") == 0
    assert limit.retry_after("a") == 10
    assert limit.retry_after("b") == 0


def test_the_table_of_clients_is_bounded():
    clock = Clock()
    limit = FailureLimit(1, 0.6, max_clients=100, clock=clock)
    for i in range(1000):
        clock.now += 0.001
        limit.take(f"10.0.{i // 256}.{i % 256}")
    assert len(limit._buckets) <= 100
    assert limit.retry_after("10.0.3.231") > 0  # the latest are remembered


def test_parallel_wrong_logins_cannot_pass_the_limit(tmp_path):
    import asyncio

    import httpx

    app = _app(tmp_path)

    async def guesses() -> list[int]:
        transport = httpx.ASGITransport(app=app, client=("203.0.113.5", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            tries = [
                c.post("/login", data={"username": "ann", "password": f"g{i}"}) for i in range(60)
            ]
            return [r.status_code for r in await asyncio.gather(*tries)]

    statuses = asyncio.run(guesses())
    assert statuses.count(303) == rate_limits.LOGIN_BURST
    assert statuses.count(429) == 60 - rate_limits.LOGIN_BURST
