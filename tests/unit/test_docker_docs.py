"""docs/docker.md names every variable docker/compose.yml reads or passes, every build
argument of docker/Dockerfile, and the README links to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "docker.md").read_text(encoding="utf-8")


def _compose_variables() -> set[str]:
    text = (ROOT / "docker" / "compose.yml").read_text(encoding="utf-8")
    names = set(re.findall(r"\$\{([A-Z0-9_]+)", text))
    for service in yaml.safe_load(text)["services"].values():
        env = service.get("environment") or {}
        names |= set(env if isinstance(env, dict) else (e.split("=")[0] for e in env))
    return names


def test_every_compose_variable_is_documented():
    names = _compose_variables()
    assert "A0_DURABILITY_RESOURCE_KEY" in names and "A0_SET_mcp_server_token" in names
    missing = sorted(n for n in names if n not in DOC and not n.startswith("POSTGRES_"))
    assert not missing, f"docs/docker.md does not mention: {missing}"


def test_every_build_argument_is_documented():
    text = (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    args = set(re.findall(r"^ARG ([A-Z0-9_]+)", text, re.MULTILINE))
    assert args == {"BASE_IMAGE", "A0_EXTRAS"}
    assert all(f"--build-arg {a}=" in DOC for a in args)


def test_the_example_env_file_names_only_documented_variables():
    text = (ROOT / "docker" / "example.env").read_text(encoding="utf-8")
    names = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, re.MULTILINE))
    assert names and names <= _compose_variables()
    assert not [n for n in names if n not in DOC]


def test_the_readme_links_the_docker_page():
    assert "docs/docker.md" in (ROOT / "README.md").read_text(encoding="utf-8")
