"""Helpers for the crash matrix and the soak: a model that answers by request content, the
tasks each call class runs, and readers for the side-effect log and the journal.

The scripted model is deterministic: its answer is a function of the conversation it is
sent (the task marker in the first user message and the number of assistant replies so
far), so a replay after a restart gets the same answer as the first run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration._durable_system import Crashable, install_side_effect_tool, side_effects
from tests.integration._helpers import request_text
from tests.support.model_server import ScriptedModel

BOUNDARIES = ("before_intent", "after_intent", "after_effect", "after_result", "after_checkpoint")
# call class -> the call name the failpoint matches (docs/durability-loop.md)
CALL_CLASSES = {
    "model": "model",
    "response": "response",
    "durable_plan": "durable_plan",
    "code_execution_tool": "code_execution_tool",
    "side_effect": "side_effect",
    "call_subordinate": "call_subordinate",
}
TASK = re.compile(r"TASK\[(?P<cls>[a-z_]+):(?P<label>[A-Za-z0-9-]+)\]")
CHILD = re.compile(r"CHILD\[(?P<label>[A-Za-z0-9-]+)\]")
FIRED_FILE = "failpoints-fired"


def task_message(call_class: str, label: str) -> str:
    return f"Please do TASK[{call_class}:{label}] now."


def first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(str(part.get("text", "")) for part in content)
            return str(content)
    return ""


def step_of(body: dict[str, Any]) -> int:
    """How many replies the agent already gave in this conversation."""
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"thoughts": [f"step {name}"], "headline": name, "tool_name": name, "tool_args": args}


def answer(text: str) -> dict[str, Any]:
    return tool("response", {"text": text})


def shell_code(usr: Path, line: str) -> str:
    return f"echo {line} >> {usr / 'side_effects.log'} && echo OUT-{line}"


def plan_value(label: str) -> dict[str, Any]:
    return {"title": f"plan {label}", "items": [{"id": "1", "text": f"do {label}", "done": True}]}


def class_step(call_class: str, label: str, step: int, usr: Path) -> dict[str, Any]:
    """Agent 0's reply at ``step`` of a one-call task of ``call_class``."""
    if call_class in ("model", "response") or step >= 1:
        return answer(f"done {label}")
    if call_class == "durable_plan":
        args = {"action": "replace", "expected_revision": 0, "plan": plan_value(label)}
        return tool("durable_plan", args)
    if call_class == "code_execution_tool":
        code = shell_code(usr, f"shell-{label}")
        return tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    if call_class == "side_effect":
        return tool("side_effect", {"label": label})
    if call_class == "call_subordinate":
        return tool("call_subordinate", {"message": f"CHILD[{label}] do it", "reset": True})
    raise ValueError(call_class)


def child_step(label: str, step: int) -> dict[str, Any]:
    """The subordinate: one side effect, then its answer."""
    if step == 0:
        return tool("side_effect", {"label": f"child-{label}"})
    return answer(f"child answer {label}")


def matrix_responder(usr: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        first = first_user_text(body)
        step = step_of(body)
        child = CHILD.search(first)
        if child:
            return child_step(child["label"], step)
        task = TASK.search(first)
        if task is None:
            return answer("no task found")
        return class_step(task["cls"], task["label"], step, usr)

    return respond


def requests_for(model: ScriptedModel, label: str) -> int:
    """Model calls agent 0 made for the task labelled ``label``."""
    return sum(
        1
        for body in model.requests
        if (m := TASK.search(first_user_text(body))) and m["label"] == label
    )


def child_requests_for(model: ScriptedModel, label: str) -> int:
    return sum(
        1
        for body in model.requests
        if (m := CHILD.search(first_user_text(body))) and m["label"] == label
    )


def saw(model: ScriptedModel, text: str) -> bool:
    return any(text in request_text(body) for body in model.requests)


def crash_env(boundary: str, match: str) -> dict[str, str]:
    return {"A0_CRASH_AT": boundary, "A0_CRASH_MATCH": match}


def rearm_failpoints(usr: Path) -> None:
    """Forget which failpoints fired, so the same boundary kills the next process again."""
    (usr / "durability" / FIRED_FILE).unlink(missing_ok=True)


def prepare(crashable: Crashable) -> None:
    install_side_effect_tool(crashable.usr)
    crashable.model.respond_with(matrix_responder(crashable.usr))


def effects(crashable: Crashable) -> list[str]:
    return side_effects(crashable.usr)


def run_by_input(crashable: Crashable, input_id: str) -> dict[str, Any]:
    rows = [r for r in crashable.runs() if r["input_id"] == input_id]
    assert len(rows) == 1, rows
    return crashable.run(rows[0]["run_id"])


def plan_of(crashable: Crashable, context_id: str) -> dict[str, Any]:
    assert crashable.server is not None
    with crashable.server.ui_client() as client:
        response = client.post("/api/durable_plan_get", json={"context_id": context_id})
    assert response.status_code == 200, response.text
    return response.json()


def dump(value: Any) -> str:
    return json.dumps(value, indent=1, default=str)[:4000]


# the soak's job ---------------------------------------------------------------------------
JOB = re.compile(r"JOB\[(?P<job>[a-z0-9]+):(?P<steps>\d+)\]")
EFFECT_LABEL = re.compile(r"\b[a-z0-9]+-(?:fx|sh|child)-\d+\b")
SOAK_CYCLE = ("side_effect", "code_execution_tool", "durable_plan", "call_subordinate", "plan_read")


def job_message(job: str, steps: int) -> str:
    return f"Run the soak JOB[{job}:{steps}] step by step."


def job_step(job: str, steps: int, step: int, usr: Path) -> dict[str, Any]:
    """Agent 0's reply at ``step`` of a soak job: a cycle of every call class, then the answer."""
    if step >= steps:
        return answer(f"job {job} done")
    kind = SOAK_CYCLE[step % len(SOAK_CYCLE)]
    if kind == "side_effect":
        return tool("side_effect", {"label": f"{job}-fx-{step}"})
    if kind == "code_execution_tool":
        code = shell_code(usr, f"{job}-sh-{step}")
        return tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    if kind == "durable_plan":
        revision = step // len(SOAK_CYCLE)
        args = {"action": "replace", "expected_revision": revision, "plan": job_plan(job, step)}
        return tool("durable_plan", args)
    if kind == "call_subordinate":
        return tool("call_subordinate", {"message": f"CHILD[{job}-{step}] help", "reset": True})
    return tool("durable_plan", {"action": "read"})


def job_plan(job: str, step: int) -> dict[str, Any]:
    return {
        "title": f"job {job}",
        "items": [{"id": str(step), "text": f"step {step}", "done": True}],
    }


def job_effects(job: str, steps: int) -> list[str]:
    """Every line a completed job leaves in the side-effect log."""
    lines = []
    for step in range(steps):
        kind = SOAK_CYCLE[step % len(SOAK_CYCLE)]
        if kind == "side_effect":
            lines.append(f"{job}-fx-{step}")
        elif kind == "code_execution_tool":
            lines.append(f"{job}-sh-{step}")
        elif kind == "call_subordinate":
            lines.append(f"{job}-child-{step}")
    return lines


def soak_responder(usr: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        first = first_user_text(body)
        step = step_of(body)
        child = CHILD.search(first)
        if child:
            job, _, number = child["label"].rpartition("-")
            if step == 0:
                return tool("side_effect", {"label": f"{job}-child-{number}"})
            return answer(f"child {child['label']} done")
        found = JOB.search(first)
        if found is None:
            return answer("no job found")
        return job_step(found["job"], int(found["steps"]), step, usr)

    return respond
