"""The chat's browser profile (cookies, local storage) is a durable resource: a private
folder under usr/, saved after every action, so a cookie survives a SIGKILL and a restart;
``reset: true`` starts clean (issue #21)."""

from __future__ import annotations

import stat

import pytest

from tests.integration._browser_support import ALLOW_PRIVATE, BROWSER_PROMPT
from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text
from tests.support.browser_site import browser_site

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

__all__ = ["browser_site", "crashable"]  # the fixtures


def _script(model, site_url: str) -> None:
    """'visit X' -> browser_agent opens X (reset when the message says so), then done."""

    def respond(body: dict) -> dict:
        text = request_text(body)
        if BROWSER_PROMPT in text:
            return {"action": "done", "response": "looked"}
        last = str(body["messages"][-1].get("content"))
        if "Last page:" in last:
            return {"tool_name": "response", "tool_args": {"text": "visited"}}
        path = last.split("visit ", 1)[1].split()[0]
        reset = "true" if "clean" in last else "false"
        task = {"message": f"Open {site_url}{path}", "reset": reset}
        return {"tool_name": "browser_agent", "tool_args": task}

    model.respond_with(respond)


def _titles(model) -> list[str]:
    """The page titles the browser model was shown, in order."""
    found = []
    for body in model.requests:
        text = request_text(body)
        if BROWSER_PROMPT in text:
            found.append(text.split("Title: ", 1)[1].splitlines()[0])
    return found


def test_the_profile_cookie_survives_a_kill_and_reset_starts_clean(
    crashable, model_server, browser_site
):
    _script(model_server, browser_site.url)
    server = crashable.start(**ALLOW_PRIVATE)
    first = server.api_message("visit /cookie please")
    assert first.status_code == 200, first.text
    context_id = first.json()["context_id"]
    folder = crashable.usr / "browser" / context_id / "profile"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "state.json").stat().st_mode) == 0o600
    assert "blue-42" in (folder / "state.json").read_text()

    crashable.kill()  # SIGKILL: nothing is closed cleanly
    server = crashable.start(**ALLOW_PRIVATE)
    second = server.api_message("visit /whoami please", context_id=context_id)
    assert second.status_code == 200, second.text
    assert _titles(model_server)[-1] == "who: visitor=blue-42"

    clean = server.api_message("visit /whoami with a clean profile", context_id=context_id)
    assert clean.status_code == 200, clean.text
    assert _titles(model_server)[-1] == "who: none"
    crashable.stop()
