"""A prompts folder written in upstream Agent Zero's conventions renders with our loader:
upstream's tool prompt file names, {{if <expression>}}, variable plugins, JSON-fenced
framework messages and fw.tool_not_found's tools_prompt. The fixtures are written here."""

from __future__ import annotations

import json
import textwrap

import pytest

from python.helpers import prompts
from python.helpers.prompts import PromptPluginError, PromptSyntaxError, render

pytestmark = pytest.mark.unit

PLUGIN = """
from python.helpers.files import VariablesPlugin


class Variables(VariablesPlugin):
    def get_variables(self, file, backup_dirs=None):
        return {"agent_profiles": ["coder", "writer"], "greeting": "from the plugin"}
"""


def write(folder, name, text):
    (folder / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


@pytest.fixture
def upstream_dirs(tmp_path):
    """[profile override folder, upstream-style base folder]."""
    profile, base = tmp_path / "profile", tmp_path / "base"
    profile.mkdir()
    base.mkdir()
    main = [
        "# Manual",
        '{{ include "agent.system.main.role.md" }}',
        '{{if mode == "strict" and len(agent_profiles) > 1}}strict with profiles'
        "{{else}}relaxed{{endif}}",
        "{{if undefined_name}}never{{endif}}{{if not undefined_name}}unset is false{{endif}}",
    ]
    write(base, "agent.system.main.md", "\n".join(main))
    write(base, "agent.system.main.role.md", "base role")
    write(profile, "agent.system.main.role.md", "profile role, then {{ include original }}")
    write(base, "agent.system.tools.md", "## Tools\n{{tools}}")
    write(
        base,
        "agent.system.tool.call_sub.md",
        """
        ### call_subordinate (upstream file name)
        profiles: {{agent_profiles}}; {{greeting}}
        {{if "coder" in agent_profiles}}a coder is available{{endif}}
    """,
    )
    write(base, "agent.system.tool.call_sub.py", PLUGIN)
    write(base, "agent.system.tool.code_exe.md", "### code_execution_tool (base, upstream name)")
    write(base, "agent.system.tool.response.md", "### response")
    write(profile, "agent.system.tool.code_execution_tool.md", "### code_execution_tool (ours)")
    write(
        base,
        "fw.user_message.md",
        """
        ```json
        {
          "system_message": {{system_message}},
          "user_message": {{message}},
          "attachments": {{attachments}}
        }
        ```
    """,
    )
    write(
        base,
        "fw.tool_not_found.md",
        """
        ~~~
        Tool {{tool_name}} not found. Available tools:
        {{tools_prompt}}
    """,
    )
    return [profile, base]


class FakeAgent:
    """What prompts.tools_prompt needs from an agent: read_prompt and config.prompts_dirs."""

    def __init__(self, dirs):
        self.config = type("C", (), {"prompts_dirs": dirs})()

    def read_prompt(self, name, **variables):
        return render(name, self.config.prompts_dirs, **variables)


def test_main_prompt_with_include_original_and_if_expressions(upstream_dirs):
    text = render("agent.system.main.md", upstream_dirs, mode="strict", agent_profiles=[1, 2])
    assert "profile role, then base role" in text
    assert "strict with profiles" in text and "relaxed" not in text
    assert "unset is false" in text and "never" not in text
    relaxed = render("agent.system.main.md", upstream_dirs, mode="easy", agent_profiles=[])
    assert "relaxed" in relaxed and "strict with profiles" not in relaxed


def test_variable_plugin_supplies_values_and_the_caller_wins(upstream_dirs):
    text = render("agent.system.tool.call_sub.md", upstream_dirs)
    assert 'profiles: ["coder", "writer"]; from the plugin' in text
    assert "a coder is available" in text
    text = render("agent.system.tool.call_sub.md", upstream_dirs, greeting="from the caller")
    assert "from the caller" in text and "from the plugin" not in text


def test_upstream_tool_prompt_names_are_the_same_tools(upstream_dirs):
    names = prompts.tool_prompt_files(upstream_dirs)
    # one prompt per tool: the profile's file (our name) replaces the base's upstream name
    assert names == [
        "agent.system.tool.call_sub.md",
        "agent.system.tool.code_execution_tool.md",
        "agent.system.tool.response.md",
    ]
    section = prompts.tools_prompt(FakeAgent(upstream_dirs))
    assert section.startswith("## Tools\n### call_subordinate (upstream file name)")
    assert "(ours)" in section and "(base, upstream name)" not in section


def test_upstream_name_in_a_profile_replaces_our_name_below(tmp_path):
    profile, base = tmp_path / "p", tmp_path / "b"
    profile.mkdir()
    base.mkdir()
    write(base, "agent.system.tool.call_subordinate.md", "ours")
    write(profile, "agent.system.tool.call_sub.md", "theirs")
    assert prompts.tool_prompt_files([profile, base]) == ["agent.system.tool.call_sub.md"]


def test_json_fenced_message_stays_valid_json(upstream_dirs):
    tricky = 'He said "hi"\nthen left {{message}} \\ done'
    text = render(
        "fw.user_message.md", upstream_dirs, message=tricky, system_message=[], attachments=[]
    )
    assert "```" not in text
    assert json.loads(text) == {"system_message": [], "user_message": tricky, "attachments": []}


def test_tool_not_found_gets_tools_prompt(upstream_dirs):
    agent = FakeAgent(upstream_dirs)
    text = agent.read_prompt(
        "fw.tool_not_found.md", tool_name="fly", tools_prompt=prompts.tools_prompt(agent)
    )
    assert text.startswith("~~~\nTool fly not found.")  # not one fenced block: kept as is
    assert "### response" in text


def test_our_own_call_subordinate_prompt_lists_the_profiles():
    text = render("agent.system.tool.call_subordinate.md", prompts.prompt_dirs("agent0"))
    assert "- developer: Developer." in text and "When to use:" in text
    assert "- default: Default." in text


def test_bad_expression_and_bad_plugins_are_clear_errors(tmp_path):
    write(tmp_path, "bad_if.md", "{{if 1 +}}x{{endif}}")
    with pytest.raises(PromptSyntaxError, match="cannot be evaluated"):
        render("bad_if.md", [tmp_path])
    write(tmp_path, "no_import.md", "{{if __import__('os')}}x{{endif}}")
    with pytest.raises(PromptSyntaxError):
        render("no_import.md", [tmp_path])
    write(tmp_path, "boom.md", "{{x}}")
    broken = (
        "class P:\n"
        "    def get_variables(self, file, dirs=None):\n"
        "        raise RuntimeError('plugin broke')\n"
    )
    write(tmp_path, "boom.py", broken)
    with pytest.raises(PromptPluginError, match="plugin broke") as info:
        render("boom.md", [tmp_path])
    assert info.value.code == "prompt_plugin_error"
    write(tmp_path, "empty.md", "{{x}}")
    write(tmp_path, "empty.py", "VALUE = 1\n")
    with pytest.raises(PromptPluginError, match="no get_variables"):
        render("empty.md", [tmp_path])


def test_an_expression_over_a_missing_value_is_false(tmp_path):
    write(tmp_path, "a.md", '{{if "x" in items}}has x{{else}}no x{{endif}}')
    assert render("a.md", [tmp_path]) == "no x"
    assert render("a.md", [tmp_path], items=["x"]) == "has x"
