"""Memorize with consolidation in a real server (issue #19): a new fact that the utility
model says replaces a stored one replaces it only when the stored one is at least
``memory_memorize_replace_threshold`` relevant; otherwise both are kept
(``keep_separate_safety``). Every utility call is a journaled model call of the run."""

from __future__ import annotations

import json
import re

import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text
from tests.integration._memory_support import memories, memory_env, responder, save

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

OLD = "Project Heron stores its backups on the host vault-7"
CLOSE = "Project Heron stores its backups on the host vault-9"  # relevance 0.94
LOOSE = "Project Heron backups now go to the host vault-9 every night"  # relevance 0.70


def _replace_all(body: dict) -> str:
    ids = re.findall(r"id: (\S+)", request_text(body))
    return json.dumps({"action": "replace", "memories_to_remove": ids, "metadata": {"t": 1}})


@pytest.mark.parametrize(("fact", "replaced"), [(CLOSE, True), (LOOSE, False)])
def test_consolidation_replaces_only_above_the_threshold(crashable, model_server, fact, replaced):
    steps = {"seed": [save(OLD, area="fragments")]}
    utility = {
        "You pick facts worth remembering": lambda body: (
            json.dumps([fact]) if fact.split()[-1] in request_text(body) else "[]"
        ),
        "You keep an AI agent's memory tidy": _replace_all,
    }
    model_server.respond_with(responder(steps, utility))
    env = memory_env(model_server, memory_recall_enabled=False)
    crashable.start(**env)
    assert crashable.server.api_message("TASK[mem:seed] keep it", input_id="s").status_code == 200
    message = f"TASK[mem:news] the backups moved: {fact}"
    assert crashable.server.api_message(message, input_id="n").status_code == 200
    run = next(r for r in crashable.runs() if r["input_id"] == "n")
    calls = [c["name"] for c in crashable.run(run["run_id"])["calls"]]
    crashable.stop()

    # extraction, keywords and the consolidation decision: journaled model calls of the run
    start = calls.index("memorize_fragments")
    assert calls[start + 1 : start + 4] == ["model", "model", "model"], calls
    stored = {m["text"]: json.loads(m["metadata"]) for m in memories(crashable.usr)}
    if replaced:
        assert set(stored) == {fact}
        assert stored[fact]["consolidation_action"] == "replace" and stored[fact]["t"] == 1
    else:
        assert set(stored) == {OLD, fact}
        assert stored[fact]["consolidation_action"] == "keep_separate_safety"
