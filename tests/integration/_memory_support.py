"""Helpers for the memory system tests: the scripted embeddings next to the scripted chat
model, a responder that answers by the conversation (so a replay gets the same answers),
and readers of the memories table."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from tests.integration._crash_matrix_support import TASK, answer, first_user_text, step_of, tool
from tests.support.model_server import ScriptedModel


def memory_env(model: ScriptedModel, **settings: Any) -> dict[str, str]:
    """Settings that point the embedding model at the scripted /v1/embeddings."""
    env = {
        "A0_SET_embed_model_provider": "other",
        "A0_SET_embed_model_api_base": model.url,
        "A0_SET_embed_model_name": "scripted-embed",
    }
    for name, value in settings.items():
        env[f"A0_SET_{name}"] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def system_text(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "system":
            return str(message.get("content"))
    return ""


#: What the utility model answers, by a phrase of the system prompt it gets.
UTILITY = {
    "You pick facts worth remembering": "[]",
    "You pick problems an AI agent solved": "[]",
    "search keywords or phrases": "[]",
    "You keep an AI agent's memory tidy": '{"action": "skip"}',
    "You maintain the behaviour rules": "## Style\n- Answer briefly.",
    "You write search queries": "-",
    "You decide which recalled memories help": "[]",
}


def is_utility(body: dict[str, Any]) -> bool:
    system = system_text(body)
    return any(phrase in system for phrase in UTILITY)


def responder(
    steps: dict[str, list[dict[str, Any]]], utility: dict[str, Any] | None = None
) -> Callable[[dict[str, Any]], Any]:
    """Agent 0 answers ``steps[label][n]`` at its n-th reply of the task ``TASK[x:label]``
    (then a final answer); utility prompts get ``utility`` (else ``UTILITY``): a text, or a
    function of the request body."""
    answers = {**UTILITY, **(utility or {})}

    def respond(body: dict[str, Any]) -> Any:
        system = system_text(body)
        for phrase, text in answers.items():
            if phrase in system:
                return text(body) if callable(text) else text
        task = TASK.search(first_user_text(body))
        if task is None:
            return answer("no task")
        plan = steps.get(task["label"], [])
        step = step_of(body)
        return plan[step] if step < len(plan) else answer(f"done {task['label']}")

    return respond


def agent_requests(model: ScriptedModel, label: str) -> list[dict[str, Any]]:
    """The main model calls agent 0 made for task ``label`` (utility calls left out)."""
    return [
        body
        for body in model.requests
        if not is_utility(body)
        and (m := TASK.search(first_user_text(body)))
        and m["label"] == label
    ]


def memories(usr: Path) -> list[dict[str, Any]]:
    """Every row of the memories table (the server must be stopped or idle)."""
    path = usr / "durability" / "journal.sqlite"
    with closing(sqlite3.connect(path)) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT id, subdir, area, text, metadata, model FROM memories")
        return [dict(r) for r in rows]


def save(text: str, **extra: Any) -> dict[str, Any]:
    return tool("memory_save", {"text": text, **extra})
