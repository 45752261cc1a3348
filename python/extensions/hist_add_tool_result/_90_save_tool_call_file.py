"""hist_add_tool_result: a long result is also saved as a file, named in history as ``file``
(python/helpers/includes.py), so the model can pass it on with ``§§include(<file>)``."""

from __future__ import annotations

import logging
from typing import Any

from python.helpers import includes
from python.helpers.extensions import Extension

logger = logging.getLogger("a0.includes")


class SaveToolCallFile(Extension):
    def execute(self, data: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not data or not isinstance(data.get("tool_result"), str):
            return
        try:
            path = includes.save_long_result(self.agent.context.id, data["tool_result"])
        except OSError as exc:  # the result is in history anyway; only the file is missing
            logger.warning("long tool result not saved: %s", type(exc).__name__)
            return
        if path is not None:
            data["file"] = str(path)
