"""A test-only tool with an external side effect and no adapter: it appends a line to
<usr>/side_effects.log, or to the file A0_TEST_SIDE_EFFECT_LOG names (a log outside every
worker, for the shared-worker tests). Tests copy this file into
<usr>/agents/agent0/tools/side_effect.py."""

from __future__ import annotations

import os
from typing import Any

from python.helpers import files
from python.helpers.tool import Response, Tool


class SideEffect(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        label = str(self.args.get("label", "effect"))
        outside = os.environ.get("A0_TEST_SIDE_EFFECT_LOG")
        path = outside or files.usr_dir() / "side_effects.log"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(label + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return Response(f"side effect {label} done", False)
