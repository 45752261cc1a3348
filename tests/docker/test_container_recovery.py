"""The project image, killed with `docker kill -s KILL` and recovered on the same volume.

(a) Killed in the middle of a shell command (it wrote its side-effect line, then waits for
    a gate): the restarted container holds the run with the uncertain call; a person's
    `confirmed_completed` completes it and the command never runs twice.
(b) Frozen right after a committed tool result (A0_CRASH_MODE=freeze), then killed: a new
    container on the same volume completes the run by itself, and the model is never asked
    again for a step it already answered.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.docker._agent import AgentContainer, DockerSetup, agent_env, dump
from tests.integration._crash_matrix_support import answer, first_user_text, step_of, tool
from tests.integration._helpers import request_text, wait_until
from tests.support.model_server import ScriptedModel

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]

TASK = re.compile(r"DOCKER\[(?P<kind>[a-z]+):(?P<label>[a-z0-9-]+)\]")
NOTE = "checked: the line is in side_effects.log once"
EFFECTS = "/a0/usr/side_effects.log"


def task(kind: str, label: str) -> str:
    return f"Please do DOCKER[{kind}:{label}] now."


def first_step(kind: str, label: str) -> dict[str, Any]:
    """The tool call the model asks for first; every later step answers."""
    if kind == "gated":  # write the side effect, then wait for the test's gate
        code = (
            f'echo "shell-{label} user=$(id -un)" >> {EFFECTS}; '
            f"while [ ! -e /a0/usr/gate-{label} ]; do sleep 0.1; done; echo OUT-{label}"
        )
        return tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    code = (  # the nodejs runtime, inside the container
        "const fs = require('fs'); const os = require('os');"
        f"fs.appendFileSync('{EFFECTS}', `node-{label} user=${{os.userInfo().username}}\\n`);"
        f"console.log('OUT-{label}');"
    )
    return tool("code_execution_tool", {"runtime": "nodejs", "session": 0, "code": code})


def respond(body: dict[str, Any]) -> dict[str, Any]:
    """Answers by request content (task marker + step), so a resumed run gets the same."""
    found = TASK.search(first_user_text(body))
    if found is None:
        return answer("no task")
    if step_of(body) == 0 and found["kind"] != "answer":
        return first_step(found["kind"], found["label"])
    return answer(f"done {found['label']}")


def steps_asked(model: ScriptedModel, label: str) -> list[int]:
    """The step of every model request made for the task labelled ``label``, in order."""
    return [
        step_of(body)
        for body in model.requests
        if (m := TASK.search(first_user_text(body))) and m["label"] == label
    ]


def effects(usr: Path) -> list[str]:
    path = usr / "side_effects.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def send_in_background(agent: AgentContainer, message: str, input_id: str) -> threading.Thread:
    def send() -> None:
        try:
            agent.api_message(message, input_id=input_id)
        except httpx.HTTPError:
            pass  # the container dies under the request

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


@pytest.fixture
def model(docker_setup: DockerSetup) -> Iterator[ScriptedModel]:
    """The scripted model on the host's address on the engine's bridge."""
    with ScriptedModel(host=docker_setup.engine.gateway) as server:
        server.respond_with(respond)
        yield server


@pytest.fixture
def containers(docker_setup: DockerSetup) -> Iterator[list[AgentContainer]]:
    made: list[AgentContainer] = []
    yield made
    for agent in made:
        agent.engine.docker("rm", "-f", agent.name, check=False)
    volumes = {agent.volume for agent in made}
    if volumes:
        docker_setup.engine.docker("volume", "rm", "-f", *volumes, check=False)


def new_agent(setup: DockerSetup, made: list[AgentContainer], name: str, volume: str):
    agent = AgentContainer(setup.engine, setup.image, name, volume)
    made.append(agent)
    return agent


def test_killed_mid_shell_call_is_held_and_a_decision_completes_it_once(
    docker_setup, model, containers
):
    label = "gated-kill"
    agent = new_agent(docker_setup, containers, "a0-held", "a0-held-usr")
    agent.run(agent_env(model))
    agent.wait_healthy()
    assert agent.server_user() == "a0"

    sender = send_in_background(agent, task("gated", label), label)
    wait_until(lambda: effects(agent.usr), timeout=120, what="the shell's side-effect line")
    receipts = agent.usr / "durability" / "receipts"
    assert list(receipts.glob("*.start")) and not list(receipts.glob("*.exit"))
    agent.kill()
    sender.join(30)
    assert agent.state("{{.State.ExitCode}}") == "137"
    # Open the gate before the restart: a wrongful second run would now finish and leave
    # a second line instead of hanging.
    (agent.usr / f"gate-{label}").touch()
    assert not list(receipts.glob("*.exit")), "the command died with its container"

    agent.start()
    agent.wait_healthy()
    run = agent.run_of(label)
    detail = dump(run)
    assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call"), detail
    open_calls = [c for c in run["calls"] if not c["committed"]]
    assert [(c["name"], c["status"], c["replay_policy"]) for c in open_calls] == [
        ("code_execution_tool", "open", "adapter:shell")
    ], detail
    refused = agent.api_message("anything new?", context_id=run["context_id"])
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "run_held")

    decided = agent.decide(run, "confirmed_completed", note=NOTE)
    assert decided.status_code == 200, decided.text
    done = agent.wait_status(label, "completed")
    detail = dump(done)
    shell = [c for c in done["calls"] if c["name"] == "code_execution_tool"]
    assert [(c["status"], c["attempt"]) for c in shell] == [("completed", 1)], detail
    assert NOTE in shell[0]["result"], detail
    assert [d["decision"] for d in done["decisions"]] == ["confirmed_completed"], detail
    again = agent.api_message(task("gated", label), input_id=label, context_id=done["context_id"])
    assert again.status_code == 200 and again.json()["response"] == f"done {label}", again.text

    assert effects(agent.usr) == [f"shell-{label} user=a0"]  # ran once, as a0, in the container
    assert steps_asked(model, label) == [0, 1], "each step was asked once"
    assert any(NOTE in request_text(body) for body in model.requests), "the note reached the model"


def test_killed_after_a_committed_tool_result_finishes_by_itself(docker_setup, model, containers):
    label = "after-result"
    volume = "a0-resume-usr"
    first = new_agent(docker_setup, containers, "a0-resume-1", volume)
    freeze = {
        "A0_CRASH_AT": "after_result",
        "A0_CRASH_MATCH": "code_execution_tool",
        "A0_CRASH_MODE": "freeze",
    }
    first.run({**agent_env(model), **freeze})
    first.wait_healthy()

    sender = send_in_background(first, task("node", label), label)
    fired = first.usr / "durability" / "failpoints-fired"
    wait_until(
        lambda: fired.exists() and "after_result:code_execution_tool" in fired.read_text(),
        timeout=120,
        what="the server to freeze after the committed tool result",
    )
    assert effects(first.usr) == [f"node-{label} user=a0"]
    assert steps_asked(model, label) == [0], "frozen before the next model call"
    first.kill()
    sender.join(30)
    first.remove()

    # A new container on the same volume (what an upgrade does), without the failpoint.
    second = new_agent(docker_setup, containers, "a0-resume-2", volume)
    second.run(agent_env(model))
    second.wait_healthy()
    done = second.wait_status(label, "completed")
    detail = dump(done)
    assert done["decisions"] == [], detail
    assert [(c["name"], c["status"], c["attempt"]) for c in done["calls"]] == [
        ("model", "completed", 1),
        ("code_execution_tool", "completed", 1),
        ("model", "completed", 1),
        ("response", "completed", 1),
    ], detail
    assert effects(second.usr) == [f"node-{label} user=a0"]
    assert steps_asked(model, label) == [0, 1], "the committed step was not asked again"
    assert any(f"OUT-{label}" in request_text(b) for b in model.requests), "output reused"
    again = second.api_message(task("node", label), input_id=label, context_id=done["context_id"])
    assert again.status_code == 200 and again.json()["response"] == f"done {label}", again.text


def test_the_journal_cli_backs_up_and_restores_on_the_volume(docker_setup, model, containers):
    """The commands docs/docker.md gives: backup through `docker exec -u a0`, restore in a
    throw-away container on the stopped agent's volume."""
    agent = new_agent(docker_setup, containers, "a0-backup", "a0-backup-usr")
    agent.run(agent_env(model))
    agent.wait_healthy()
    first = agent.api_message(task("answer", "before-backup"), input_id="before-backup")
    assert first.status_code == 200 and first.json()["response"] == "done before-backup"

    cli = ["exec", "-u", "a0", agent.name, "python", "-m", "durability", "--json"]
    made = json.loads(docker_setup.engine.docker(*cli, "backup").stdout)
    assert made["backup"].startswith("/a0/usr/durability/backups/journal-"), made
    later = agent.api_message(task("answer", "after-backup"), input_id="after-backup")
    assert later.status_code == 200, later.text
    assert {r["input_id"] for r in agent.runs()} == {"before-backup", "after-backup"}

    docker_setup.engine.docker("stop", "-t", "30", agent.name)
    restore = ["run", "--rm", "-v", f"{agent.volume}:/a0/usr", docker_setup.image]
    docker_setup.engine.docker(*restore, "python", "-m", "durability", "restore", made["backup"])
    agent.start()
    agent.wait_healthy()
    assert {r["input_id"] for r in agent.runs()} == {"before-backup"}, "the backup's journal"
    owners = {p.stat().st_uid for p in (agent.usr / "durability").rglob("*")}
    assert owners == {1000}, "everything on the volume stays a0's"
