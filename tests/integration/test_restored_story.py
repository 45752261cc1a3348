"""The whole story after a restart (issue #11, point 2), over HTTP against real run_ui.py
processes that SIGKILL themselves at a failpoint: the poll endpoint shows every journaled
call once, the steps after the last checkpoint marked restored, the uncertain call marked,
secrets masked; after the run resumes (a decision, or the automatic replay) still once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.integration._durable_system import Crashable, crashable, install_side_effect_tool
from tests.integration._durable_system import side_effects as side_effects_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

__all__ = ["crashable"]  # the fixture

SECRET = "pay-token-3f9a62c1d0e4"
MESSAGE = "pay both bills"


def _script(crashable: Crashable) -> None:
    install_side_effect_tool(crashable.usr)
    (crashable.usr / "secrets.env").write_text(f"BANK_TOKEN={SECRET}\n", encoding="utf-8")
    model = crashable.model
    model.tool("side_effect", {"label": "one"}, headline="First payment")
    model.tool("side_effect", {"label": "two", "token": SECRET}, headline="Second payment")
    model.tool("response", {"text": "Both payments sent."}, headline="Reporting")


def _poll(crashable: Crashable, context_id: str) -> list[dict[str, Any]]:
    assert crashable.server is not None
    with crashable.server.ui_client() as client:
        response = client.post("/api/poll", json={"context": context_id, "log_from": 0})
    assert response.status_code == 200, response.text
    assert SECRET not in response.text, "a secret reached the chat log unmasked"
    return response.json()["logs"]


def _headed(items: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    return [i for i in items if text in i["heading"]]


def _tool(items: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    return [i for i in items if i["type"] == "tool" and i["kvps"].get("label") == label]


def _assert_each_call_once(run: dict[str, Any], items: list[dict[str, Any]]) -> None:
    shown = Counter(i["call_id"] for i in items if i.get("call_id"))
    calls = [c for c in run["calls"] if c["status"] != "superseded"]
    assert calls
    for call in calls:
        assert shown[call["call_id"]] == 1, (call["name"], call["seq"], call["status"], shown)
    assert set(shown) <= {c["call_id"] for c in calls}, "an item names a call of no run"
    assert len(_headed(items, "A0: First payment")) == 1
    assert len(_headed(items, "A0: Second payment")) == 1
    assert len(_tool(items, "one")) == 1 and len(_tool(items, "two")) == 1


def test_a_held_run_shows_every_committed_call_once_and_marks_the_uncertain_one(crashable):
    _script(crashable)
    crash = {"A0_CRASH_AT": "after_intent@2", "A0_CRASH_MATCH": "side_effect"}
    crashable.crash_during(MESSAGE, "bills-held", **crash)
    crashable.start()
    run = crashable.only_run()
    assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call"), run
    items = _poll(crashable, run["context_id"])

    _assert_each_call_once(run, items)
    calls = {c["call_id"]: c for c in run["calls"]}
    [second] = _headed(items, "A0: Second payment")
    assert second["restored"] == "journal" and calls[second["call_id"]]["committed"]
    assert second["kvps"]["tool_args"]["token"] == "§§secret(BANK_TOKEN)"
    [two] = _tool(items, "two")
    assert two["restored"] == "uncertain" and calls[two["call_id"]]["status"] == "open"
    assert two["kvps"]["token"] == "§§secret(BANK_TOKEN)"
    # the steps the checkpoint held are shown as they ran
    [first] = _headed(items, "A0: First payment")
    assert "restored" not in first and "restored" not in _tool(items, "one")[0]
    assert items.index(first) < items.index(second) < items.index(two)
    assert items[-1]["type"] == "warning" and "uncertain_call" in items[-1]["content"]

    decided = crashable.decide(run, "resume")
    assert decided.status_code == 200, decided.text
    done = crashable.wait_status(run["run_id"], "completed")
    items = _poll(crashable, run["context_id"])
    _assert_each_call_once(done, items)
    [two] = _tool(items, "two")
    assert (
        two["restored"] == "journal"
        and "outcome of this side_effect call is unknown" in (two["content"])
    )
    assert [i["content"] for i in items if i["type"] == "response"] == ["Both payments sent."]
    assert not [i for i in items if i.get("restored") == "uncertain"]
    assert side_effects_of(crashable.usr) == ["one"], "the uncertain call never ran again"
    crashable.stop()


def test_an_automatically_resumed_run_shows_every_call_once(crashable):
    _script(crashable)
    crash = {"A0_CRASH_AT": "after_result@2", "A0_CRASH_MATCH": "side_effect"}
    crashable.crash_during(MESSAGE, "bills-resumed", **crash)
    crashable.start()
    [row] = crashable.runs()
    done = crashable.wait_status(row["run_id"], "completed")
    items = _poll(crashable, done["context_id"])
    _assert_each_call_once(done, items)
    [two] = _tool(items, "two")
    assert two["restored"] == "journal" and two["content"] == "side effect two done"
    assert [i["content"] for i in items if i["type"] == "response"] == ["Both payments sent."]
    assert side_effects_of(crashable.usr) == ["one", "two"]
    crashable.stop()
