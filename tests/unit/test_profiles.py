"""Agent profiles: agents/<name>/agent.yaml (title, description, context), usr/ wins."""

from __future__ import annotations

import pytest

from python.helpers import profiles

pytestmark = pytest.mark.unit


def test_shipped_profiles_are_read_from_agent_yaml():
    found = {p.name: p for p in profiles.list_profiles()}
    assert {"agent0", "default", "developer"} <= set(found)
    developer = found["developer"]
    assert developer.title == "Developer"
    assert "software engineer" in developer.description
    assert developer.context.startswith("Use this profile for programming tasks")


def test_usr_profile_wins_bad_yaml_is_tolerated_and_underscore_is_skipped(_private_usr_dir):
    agents = _private_usr_dir / "agents"
    (agents / "developer").mkdir(parents=True)
    (agents / "developer" / "agent.yaml").write_text("title: My developer\ncontext: mine\n")
    (agents / "broken").mkdir()
    (agents / "broken" / "agent.yaml").write_text("title: [unclosed\n")
    (agents / "listy").mkdir()
    (agents / "listy" / "agent.yaml").write_text("- a\n- b\n")
    (agents / "_example").mkdir()
    found = {p.name: p for p in profiles.list_profiles()}
    assert found["developer"].title == "My developer" and found["developer"].context == "mine"
    assert found["broken"] == profiles.Profile("broken")
    assert found["listy"] == profiles.Profile("listy")
    assert "_example" not in found
    assert profiles.get_profile("nope") is None
    text = profiles.listing_text([found["developer"], found["broken"]])
    assert text == "- developer: My developer. When to use: mine\n- broken"


def test_agent_json_and_context_md_as_upstream(_private_usr_dir):
    """Upstream 1.x reads agent.json when there is no agent.yaml, and 0.9 only _context.md."""
    agents = _private_usr_dir / "agents"
    for name in ("jsonish", "contextual", "both", "badjson"):
        (agents / name).mkdir(parents=True)
    (agents / "jsonish" / "agent.json").write_text(
        '{"title": "Jason", "description": "JSON-configured.", "context": "for JSON"}'
    )
    (agents / "contextual" / "_context.md").write_text("Use it for *context* work.\n")
    (agents / "both" / "agent.yaml").write_text("title: From YAML\n")
    (agents / "both" / "agent.json").write_text('{"title": "From JSON"}')
    (agents / "badjson" / "agent.json").write_text("{nope")
    found = {p.name: p for p in profiles.list_profiles()}
    assert found["jsonish"] == profiles.Profile("jsonish", "Jason", "JSON-configured.", "for JSON")
    assert found["contextual"].context == "Use it for *context* work."
    assert found["both"].title == "From YAML"  # agent.yaml first
    assert found["badjson"] == profiles.Profile("badjson")
