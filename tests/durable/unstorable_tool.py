"""A test-only tool whose result the journal cannot store. It records that it ran (one line
in <usr>/side_effects.log) and returns what ``kind`` names: a set as its message, an object
or a NaN in its additional data, text that is not valid Unicode, or no Response at all.
Tests copy this file into <usr>/agents/agent0/tools/unstorable.py."""

from __future__ import annotations

import os
from typing import Any

from python.helpers import files
from python.helpers.tool import Response, Tool


class Unstorable(Tool):
    async def execute(self, **kwargs: Any) -> Any:
        kind = str(self.args.get("kind", "set"))
        with open(files.usr_dir() / "side_effects.log", "a", encoding="utf-8") as fh:
            fh.write(f"unstorable:{kind}\n")
            fh.flush()
            os.fsync(fh.fileno())
        if kind == "set":
            return Response({"a", "b"}, False)  # type: ignore[arg-type]
        if kind == "object":
            return Response("made an object", False, additional={"handle": object()})
        if kind == "nan":
            return Response("a number", False, additional={"value": float("nan")})
        if kind == "surrogate":
            return Response("broken \ud800 text", False)
        return {"not", "a", "response"}
