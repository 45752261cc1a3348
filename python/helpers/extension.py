"""The ``Extension`` base class (upstream's module name, so that upstream extensions that
import it load unchanged). Discovery and calling live in python/helpers/extensions.py."""

from __future__ import annotations

from typing import Any


class Extension:
    """Base of every extension: built with the agent for one call, then ``execute``d."""

    def __init__(self, agent: Any = None, **kwargs: Any) -> None:
        self.agent = agent
        self.kwargs = kwargs

    def execute(self, **kwargs: Any) -> Any:
        """Do the extension's work (sync or async)."""
        return None
