"""A server stop (SIGTERM) never ends a journaled run: the next start recovers it."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.integration._durable_system import Crashable
from tests.integration._durable_system import crashable as crashable

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_sigterm_mid_model_call_leaves_the_run_for_recovery(crashable: Crashable):
    model = crashable.model
    answer = {"thoughts": ["done"], "headline": "", "tool_name": "response",
              "tool_args": {"text": "after-restart"}}  # fmt: skip
    model.reply(answer, delay=60)  # the call in flight when the server stops
    model.reply(answer)
    server = crashable.start()

    def send() -> None:
        try:
            server.api_message("slow job", input_id="job-1")
        except httpx.HTTPError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    model.wait_for_calls(1, timeout=60)
    crashable.stop()  # SIGTERM; exit code 0 is asserted
    sender.join(30)

    crashable.start()
    run = crashable.only_run()
    # An open model call is uncertain: held for a person, never silently stopped.
    assert run["status"] == "needs_attention", run
    assert any(c["kind"] == "model" and not c["committed"] for c in run["calls"]), run
    decided = crashable.decide(run, "new_attempt")
    assert decided.status_code == 200, decided.text
    done = crashable.wait_status(run["run_id"], "completed")
    assert done["status"] == "completed"
    repeat = crashable.server.api_message("slow job", input_id="job-1")
    assert repeat.status_code == 200, repeat.text
    assert repeat.json()["response"] == "after-restart"
