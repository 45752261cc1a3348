"""Variables of agent.system.tool.call_subordinate.md (and of upstream's call_sub.md):
``agent_profiles``, the profiles a subordinate can be given, one line each."""

from __future__ import annotations

from typing import Any

from python.helpers import profiles
from python.helpers.files import VariablesPlugin


class CallSubordinateVariables(VariablesPlugin):
    def get_variables(self, file: str, backup_dirs: list[str] | None = None) -> dict[str, Any]:
        found = profiles.list_profiles()
        return {
            "agent_profiles": profiles.listing_text(found),
            "agent_profile_names": [p.name for p in found],
        }
