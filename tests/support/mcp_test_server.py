"""An MCP server for tests, written with the official SDK (the same one the agent uses).

    python tests/support/mcp_test_server.py --log FILE [--transport stdio|http|sse]
        [--port N] [--token T] [--name NAME]

Every tool that acts appends one line to the side-effect log FILE (fsynced), so a test can
count effects across crashes. ``MCP_TEST_LOG`` in the environment may give FILE instead of
``--log`` (stdio servers get it from their ``env`` config). With ``--token`` an HTTP server
refuses requests without ``Authorization: Bearer <token>``. The tool ``whoami`` answers with
the ``MCP_TEST_API_KEY`` it was started with (a credential the agent must mask).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build(name: str, log: Path) -> MCPServer:
    app = MCPServer(name)

    def append(line: str) -> None:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    @app.tool()
    def add_note(text: str) -> str:
        """Store a note (appends it to the notes log)."""
        append(f"note:{text}")
        return f"noted: {text}"

    @app.tool()
    def slow_note(text: str, release_file: str) -> str:
        """Store a note, then wait until release_file exists (at most 120 s)."""
        append(f"slow:{text}")
        deadline = time.monotonic() + 120
        while not Path(release_file).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return f"slowly noted: {text}"

    @app.tool()
    def whoami() -> str:
        """Tell which API key this server was started with."""
        return f"my key is {os.environ.get('MCP_TEST_API_KEY', '')}"

    @app.tool()
    def die() -> str:
        """Crash the server process in the middle of the call."""
        append("die")
        os._exit(3)

    @app.tool()
    def fail(reason: str) -> str:
        """Report a tool error (the call itself works)."""
        raise ToolError(f"tool failed on purpose: {reason}")

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="stdio", choices=["stdio", "http", "sse"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", default=os.environ.get("MCP_TEST_LOG", ""))
    parser.add_argument("--token", default="")
    parser.add_argument("--name", default="notes")
    args = parser.parse_args()
    if not args.log:
        sys.exit("--log or MCP_TEST_LOG is required")
    app = build(args.name, Path(args.log))
    if args.transport == "stdio":
        app.run()
        return
    import uvicorn
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import JSONResponse

    web = app.streamable_http_app() if args.transport == "http" else app.sse_app()

    async def check_token(request, call_next):
        if args.token and request.headers.get("authorization") != f"Bearer {args.token}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return await call_next(request)

    web.add_middleware(BaseHTTPMiddleware, dispatch=check_token)
    uvicorn.run(web, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
