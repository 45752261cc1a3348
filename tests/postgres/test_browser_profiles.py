"""With shared PostgreSQL workers the chat's browser profile moves with the run: stored
encrypted with the resource key after each browser action, restored on the worker that
takes the run over into the chat's private browser folder (issue #21)."""

from __future__ import annotations

import signal
import stat

import pytest

from tests.integration._browser_support import ALLOW_PRIVATE, BROWSER_PROMPT, script
from tests.integration._helpers import request_text
from tests.postgres._workers import in_background, wait_status, workers
from tests.support.browser_site import browser_site
from tests.support.model_server import model_server

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

__all__ = ["browser_site", "model_server", "workers"]  # the fixtures


def _titles(model) -> list[str]:
    found = []
    for body in model.requests:
        text = request_text(body)
        if BROWSER_PROMPT in text:
            found.append(text.split("Title: ", 1)[1].splitlines()[0])
    return found


def test_the_browser_profile_moves_to_the_worker_that_takes_the_run_over(
    workers, model_server, browser_site
):
    site = browser_site.url
    plan = [
        {"action": "navigate", "url": f"{site}/form"},
        {"action": "extract"},  # worker A dies right after it ran
        {"action": "navigate", "url": f"{site}/whoami"},
        {"action": "done", "response": "checked"},
    ]
    script(model_server, f"Open {site}/cookie, then look around", plan)
    # browser_read effects: 1 the task's URL (/cookie), 2 /form, 3 extract
    crash = {**ALLOW_PRIVATE, "A0_CRASH_AT": "after_effect@3", "A0_CRASH_MATCH": "browser_read"}
    a = workers.start("worker-a", **crash)
    b = workers.start("worker-b", **ALLOW_PRIVATE)
    in_background(lambda: a.api_message("visit the shop", input_id="shop"))
    assert a.process is not None
    assert a.process.wait(180) == -signal.SIGKILL, a.output()[-3000:]

    [(run_id, context_id, _status)] = workers.runs()
    done = wait_status(b, run_id, "completed", timeout=180)
    assert done["decisions"] == []  # reading actions: resumed without a hold
    assert workers.claimers(run_id) == ["worker-a", "worker-b"]
    # worker B's browser never opened /cookie: the cookie came with the profile
    assert _titles(model_server)[-1] == "who: visitor=blue-42"
    folder = workers.tmp / "worker-b" / "browser" / context_id / "profile"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    state = folder / "state.json"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600 and "blue-42" in state.read_text()
    assert "browser profile" in b.output()
    kinds = workers.sql("SELECT DISTINCT kind FROM resource_snapshots ORDER BY kind")
    assert ("browser_profile",) in kinds
    plain = workers.sql(
        "SELECT count(*) FROM resource_files WHERE position('blue-42'::bytea in data) > 0"
    )
    assert plain == [(0,)]  # stored encrypted
