"""A real turn (run_ui.py + the scripted model) with a profile whose prompts override ours,
written in upstream Agent Zero's conventions: upstream tool prompt names, {{if <expr>}},
a variable plugin, a JSON-fenced fw.user_message.md and fw.tool_not_found's tools_prompt."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.integration._helpers import request_text
from tests.support.model_server import ScriptedModel
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = pytest.mark.integration

PROFILE = "upstreamish"
FILES = {
    "agent.yaml": """
        title: Upstream-style agent
        description: Renders prompts written in upstream's conventions.
        context: Use it to check prompt compatibility.
    """,
    "prompts/agent.system.main.role.md": """
        ## Role
        You are UPSTREAMISH, codename {{codename}}.
        {{if codename == "blue" and len(team) == 2}}Team of two: {{team}}.{{endif}}
        {{ include original }}
    """,
    "prompts/agent.system.main.role.py": """
        from python.helpers.files import VariablesPlugin


        class RoleVariables(VariablesPlugin):
            def get_variables(self, file, backup_dirs=None):
                return {"codename": "blue", "team": ["ann", "bob"]}
    """,
    "prompts/agent.system.tool.code_exe.md": """
        ### code_execution_tool
        UPSTREAM-CODE-EXE prompt: runtime terminal, python, nodejs, output or reset.
    """,
    "prompts/agent.system.tool.call_sub.md": """
        ### call_subordinate
        UPSTREAM-CALL-SUB; profiles:
        {{agent_profiles}}
    """,
    "prompts/fw.user_message.md": """
        ```json
        {
          "system_message": {{system_message}},
          "user_message": {{message}},
          "attachments": {{attachments}}
        }
        ```
    """,
    "prompts/fw.tool_not_found.md": """
        UPSTREAM-NOT-FOUND {{tool_name}}. The tools:
        {{tools_prompt}}
    """,
}


def install_profile(usr: Path) -> None:
    root = usr / "agents" / PROFILE
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def test_a_turn_with_an_upstream_style_profile(tmp_path, model_server: ScriptedModel):
    usr = tmp_path / "usr"
    install_profile(usr)
    server = UiServer(usr, env={**ui_env_for(model_server), "A0_SET_agent_profile": PROFILE})
    model_server.tool("fly_to_the_moon", {})
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": "echo from-shell"})
    model_server.tool("response", {"text": "done the upstream way"})
    message = 'quote " and newline\nstay valid'
    try:
        server.start(timeout=SLOW_START)
        response = server.api_message(message)
        assert response.status_code == 200, response.text
        assert response.json()["response"] == "done the upstream way"
    finally:
        server.kill()

    first = model_server.requests[0]["messages"]
    system = first[0]["content"]
    assert "You are UPSTREAMISH, codename blue." in system
    assert 'Team of two: ["ann", "bob"].' in system
    assert "## Your role" in system  # include original: our role follows the override
    assert "UPSTREAM-CODE-EXE prompt" in system
    assert "Runs code in persistent sessions" not in system  # our prompt was replaced
    assert system.count("### code_execution_tool") == 1
    assert system.count("### call_subordinate") == 1
    assert "UPSTREAM-CALL-SUB" in system
    assert f"- {PROFILE}: Upstream-style agent." in system  # our plugin, through the alias
    # the step's [EXTRAS] (the current time) follow the user message in the same turn
    user_text, extras = first[-1]["content"].split("\n\n[EXTRAS]\n", 1)
    assert "current_datetime" in extras
    user = json.loads(user_text)
    assert user == {"system_message": "", "user_message": message, "attachments": ""}

    not_found = request_text(model_server.requests[1])
    assert "UPSTREAM-NOT-FOUND fly_to_the_moon. The tools:" in not_found
    assert "UPSTREAM-CODE-EXE prompt" in not_found.split("UPSTREAM-NOT-FOUND")[1]
    assert "from-shell" in request_text(model_server.requests[2])
