"""GET /api/csrf_token: the session's CSRF token for the X-CSRF-Token header."""

from __future__ import annotations

from typing import Any

from python.server import auth
from python.server.api import ApiHandler


class CsrfToken(ApiHandler):
    requires_csrf = False
    methods = ("GET",)

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        auth.check_origin(request, self.runtime.auth)  # the guard checked it too
        return {
            "ok": True,
            "token": await auth.csrf_token_for(request),
            "runtime_id": self.runtime.runtime_id,
            "login": self.runtime.auth.login_required,
        }
