"""Memory across chats and restarts, with real processes: a fact saved in chat A (by the
memory_save tool, and one memorized at the end of the monologue) is recalled in a new chat
B after the server restarted, both automatically into the prompt and through memory_load;
a secret in a saved text is masked before it is embedded, stored or returned."""

from __future__ import annotations

import json

import pytest

from tests.integration._crash_matrix_support import task_message, tool
from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text
from tests.integration._memory_support import (
    agent_requests,
    memories,
    memory_env,
    responder,
    save,
)

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

FACT = "The deploy host for project Falcon is build-42.example"
SECRET = "tok-Falcon-9f8e7d6c5b4a"
FRAGMENT = "Project Falcon is deployed to the deploy host with Ansible."
QUESTION = "TASK[load:b1] What is the deploy host for project Falcon?"


def test_a_fact_saved_in_one_chat_is_recalled_in_a_new_chat_after_a_restart(
    crashable, model_server
):
    (crashable.usr / "secrets.env").write_text(f"DEPLOY_TOKEN={SECRET}\n", encoding="utf-8")
    steps = {
        "a1": [
            save(f"{FACT}. The deploy token is {SECRET}.", source="user"),
            tool("behaviour_adjustment", {"adjustments": "Answer briefly from now on."}),
        ],
        "b1": [tool("memory_load", {"query": "deploy host project Falcon", "threshold": 0.6})],
    }
    utility = {"You pick facts worth remembering": json.dumps([FRAGMENT])}
    model_server.respond_with(responder(steps, utility))
    env = memory_env(model_server)

    crashable.start(**env)
    response = crashable.server.api_message(task_message("save", "a1"), input_id="a1")
    assert response.status_code == 200, response.text
    crashable.stop()

    stored = memories(crashable.usr)
    assert sorted(m["area"] for m in stored) == ["behaviour", "fragments", "main"]
    main = next(m for m in stored if m["area"] == "main")
    assert SECRET not in json.dumps(stored)  # masked before it was stored
    assert "§§secret(DEPLOY_TOKEN)" in main["text"]
    assert json.loads(main["metadata"]) == {"source": "user"}
    embedded = " ".join(model_server.embedded_texts)
    assert SECRET not in embedded and "build-42.example" in embedded

    crashable.start(**env)  # a new process: nothing of chat A is in memory but the journal
    response = crashable.server.api_message(QUESTION, input_id="b1")
    assert response.status_code == 200, response.text
    first, after_load = agent_requests(model_server, "b1")
    # recalled into chat B's very first prompt, after the history (the extras)
    recalled = first["messages"][-1]["content"]
    assert "build-42.example" in recalled and "Memories recalled" in recalled
    assert FRAGMENT in recalled
    assert "build-42.example" not in request_text(agent_requests(model_server, "a1")[0])
    # and returned by memory_load, with its metadata, the secret still masked
    loaded = after_load["messages"][-1]["content"]
    assert "build-42.example" in loaded and "source: user" in loaded and "id: " in loaded
    assert SECRET not in request_text(after_load) and SECRET not in request_text(first)
    # the behaviour rules of chat A head chat B's system prompt
    system = first["messages"][0]["content"]
    assert system.startswith("# Behaviour rules") and "- Answer briefly." in system
    runs = crashable.runs()
    assert {r["status"] for r in runs} == {"completed"}
    crashable.stop()

    # another memory subdir is another memory: nothing of the default one is seen
    crashable.start(**env, A0_SET_agent_memory_subdir="project-heron")
    steps["c1"] = steps["b1"]
    question = QUESTION.replace("b1", "c1")
    assert crashable.server.api_message(question, input_id="c1").status_code == 200
    first, after_load = agent_requests(model_server, "c1")
    assert "build-42.example" not in request_text(first) + request_text(after_load)
    assert "No memories found" in after_load["messages"][-1]["content"]
    assert "No special behaviour rules" in first["messages"][0]["content"]
    crashable.stop()


OTHER = "The deploy host for project Falcon used to be build-7.example"


def test_recall_with_query_preparation_post_filter_and_delay(crashable, model_server):
    """The utility model writes the query and picks what is shown (both journaled model
    calls); with ``memory_recall_delayed`` the results reach the prompt one step later."""
    steps = {
        "a2": [save(FACT), save(OTHER)],
        "b2": [tool("memory_load", {"query": "nothing in particular", "threshold": 0.99})],
    }
    utility = {
        "You write search queries": "deploy host for project Falcon",
        "You decide which recalled memories help": "[1]",
    }
    model_server.respond_with(responder(steps, utility))
    settings = {
        "memory_recall_query_prep": True,
        "memory_recall_post_filter": True,
        "memory_recall_delayed": True,
        "memory_memorize_enabled": False,
    }
    crashable.start(**memory_env(model_server, **settings))
    assert crashable.server.api_message("TASK[save:a2] keep", input_id="a2").status_code == 200
    question = QUESTION.replace("b1", "b2")
    assert crashable.server.api_message(question, input_id="b2").status_code == 200
    first, second = agent_requests(model_server, "b2")
    assert "appears from the next step" in first["messages"][-1]["content"]
    assert "build-" not in first["messages"][-1]["content"]
    shown = second["messages"][-1]["content"]
    assert "Memories recalled" in shown
    assert (FACT in shown) != (OTHER in shown)  # the filter kept one of the two
    filtered = [b for b in model_server.requests if "You decide which" in request_text(b)]
    assert len(filtered) == 1 and FACT in request_text(filtered[0])
    run = next(r for r in crashable.runs() if r["input_id"] == "b2")
    names = [c["name"] for c in crashable.run(run["run_id"])["calls"]]
    assert names[1:4] == ["memory_recall", "model", "model"], names  # query, filter: journaled
    crashable.stop()
