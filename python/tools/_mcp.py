"""A tool of an MCP server, called by the model as ``<server>.<tool>``.

Not a tool name itself (the leading underscore hides it): ``Agent.get_tool`` returns this
class for a name whose server is configured (python/helpers/mcp_client.py). It runs through
``Agent.execute_tool`` like every tool, so the journal records intent and result with policy
``hold``: after a crash in the middle of a call nobody can prove what the server did, and
the run waits for a person instead of calling the server again.
"""

from __future__ import annotations

from typing import Any

from python.helpers import mcp_client, secrets
from python.helpers.tool import Response, Tool

UNKNOWN_OUTCOME = (
    " The call may or may not have taken effect on the server: check before you repeat it."
)


class McpToolCall(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        try:
            text, is_error = await mcp_client.manager().call(self.name, dict(self.args))
        except mcp_client.McpCallError as exc:
            note = UNKNOWN_OUTCOME if exc.outcome_unknown else ""
            message = f"MCP tool '{self.name}' failed: {exc.message}.{note}"
            return Response(str(secrets.mask(message)), break_loop=False)
        if is_error:
            text = f"MCP tool '{self.name}' reported an error: {text or '(no details)'}"
        return Response(str(secrets.mask(text)) or "(the tool returned nothing)", break_loop=False)
