"""Agent profiles: ``agents/<name>/`` (and ``usr/agents/<name>/``, which wins) with an
``agent.yaml`` holding ``title``, ``description`` and ``context`` (Agent Zero's layout).
As upstream, ``agent.json`` (the same keys) is read when there is no agent.yaml, and a
profile with neither takes its ``context`` from ``_context.md`` (free Markdown, Agent Zero
0.9's format).

``context`` tells a superior agent when to choose the profile; call_subordinate's tool
prompt lists every profile with it (prompts/agent.system.tool.call_subordinate.py).
Folders whose name starts with ``_`` (upstream's ``_example``) are not profiles.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from python.helpers import files, yaml_files

logger = logging.getLogger("a0.profiles")

PROFILE_FILE = "agent.yaml"
JSON_FILE = "agent.json"  # upstream 1.x, when there is no agent.yaml
CONTEXT_FILE = "_context.md"  # upstream 0.9: the context alone


@dataclass(frozen=True)
class Profile:
    name: str
    title: str = ""
    description: str = ""
    context: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def profile_roots() -> list[Path]:
    """Where profiles live, highest priority first."""
    return [files.usr_dir() / "agents", files.BASE_DIR / "agents"]


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return value.strip() if isinstance(value, str) else ""


def read_profile(folder: Path) -> Profile:
    """The profile in ``folder``; a missing or unreadable agent.yaml leaves the texts empty
    (logged), so a folder with only prompts still works as a profile."""
    path = folder / PROFILE_FILE
    data: Any = {}
    if path.is_file():
        try:
            data = yaml_files.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml_files.YAMLError) as exc:
            logger.warning("%s is not readable YAML: %s", path, exc)
            data = {}
    elif (folder / JSON_FILE).is_file():
        try:
            data = json.loads((folder / JSON_FILE).read_text(encoding="utf-8")) or {}
        except (OSError, ValueError) as exc:
            logger.warning("%s is not readable JSON: %s", folder / JSON_FILE, exc)
            data = {}
    elif (folder / CONTEXT_FILE).is_file():
        try:
            data = {"context": (folder / CONTEXT_FILE).read_text(encoding="utf-8")}
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("%s is not readable: %s", folder / CONTEXT_FILE, exc)
    if not isinstance(data, dict):
        logger.warning("%s must hold a mapping (title, description, context)", path)
        data = {}
    title, description = _text(data, "title"), _text(data, "description")
    return Profile(folder.name, title, description, _text(data, "context"))


def list_profiles() -> list[Profile]:
    """Every profile, sorted by name; ``usr/agents/<name>`` wins over ``agents/<name>``."""
    found: dict[str, Profile] = {}
    for root in profile_roots():
        if not root.is_dir():
            continue
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and not folder.name.startswith((".", "_")):
                found.setdefault(folder.name, read_profile(folder))
    return [found[name] for name in sorted(found)]


def get_profile(name: str) -> Profile | None:
    for profile in list_profiles():
        if profile.name == name:
            return profile
    return None


def listing_text(profiles: list[Profile]) -> str:
    """One line per profile for a prompt: ``- name: title. description. context``."""
    lines = []
    for profile in profiles:
        parts = [p.rstrip(".") + "." for p in (profile.title, profile.description) if p]
        line = f"- {profile.name}: " + " ".join(parts) if parts else f"- {profile.name}"
        if profile.context:
            line += f" When to use: {profile.context}"
        lines.append(line)
    return "\n".join(lines)
