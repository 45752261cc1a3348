"""The scripted models of the browser_agent system tests: the chat model hands the task to
browser_agent and answers with its result; the browser model follows a plan of actions,
one per step, chosen from the number of steps its prompt shows (so a resumed task gets the
same answers at the same steps)."""

from __future__ import annotations

import re
from typing import Any

from tests.integration._helpers import request_text
from tests.support.model_server import ScriptedModel

BROWSER_PROMPT = "You control a headless web browser"
ALLOW_PRIVATE = {"A0_SET_browser_allow_private_addresses": "true"}
_STEP = re.compile(r"^\d+\. ", re.MULTILINE)


def steps_shown(text: str) -> int:
    section = text.split("Steps so far:", 1)[-1].split("Current page:", 1)[0]
    return len(_STEP.findall(section))


def script(model: ScriptedModel, task: str, plan: list[dict[str, Any]]) -> None:
    """Answer every request: the chat model's and the browser model's."""

    def respond(body: dict) -> dict:
        text = request_text(body)
        if BROWSER_PROMPT in text:
            n = steps_shown(text)
            return plan[n] if n < len(plan) else {"action": "done", "response": "all done"}
        if (
            "Last page:" in text
            or "browser_agent failed" in text
            or "browser_agent stopped" in text
        ):
            return {"tool_name": "response", "tool_args": {"text": "browser task finished"}}
        return {"tool_name": "browser_agent", "tool_args": {"message": task}}

    model.respond_with(respond)


def calls_named(run: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [c for c in run["calls"] if c["name"] == name]
