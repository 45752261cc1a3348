"""search_engine is on the safe-replay allowlist: a run killed (SIGKILL) in the middle of a
search is not held after the restart; the search simply runs again."""

from __future__ import annotations

import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text
from tests.support.searxng_server import SearxngServer

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture


@pytest.mark.parametrize("boundary", ["after_intent", "after_effect"])
def test_search_interrupted_by_a_crash_is_replayed_not_held(crashable, model_server, boundary):
    with SearxngServer() as searx:
        searx.results["durable agents"] = [
            {"title": "Durable", "url": "https://example.org/d", "content": "Journals."}
        ]
        env = {"A0_SET_searxng_url": searx.url}
        model_server.tool("search_engine", {"query": "durable agents"})
        model_server.tool("response", {"text": "searched"})
        crash = {"A0_CRASH_AT": boundary, "A0_CRASH_MATCH": "search_engine"}
        crashable.crash_during("search the web", "search-1", **crash, **env)
        asked_before_restart = searx.asked("durable agents")
        assert asked_before_restart == (1 if boundary == "after_effect" else 0)

        crashable.start(**env)
        run = crashable.only_run()
        done = crashable.wait_status(run["run_id"], "completed")
        assert searx.asked("durable agents") == asked_before_restart + 1  # replayed once
        search = [c for c in done["calls"] if c["name"] == "search_engine"]
        assert [(c["replay_policy"], c["committed"]) for c in search] == [("safe_replay", True)]
        assert model_server.calls == 2  # the first reply was reused, never asked again
        assert "https://example.org/d" in request_text(model_server.requests[1])
        crashable.stop()
