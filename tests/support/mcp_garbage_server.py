"""A stdio "MCP server" that starts like a real one and answers every tool call with a
result that is not a valid MCP result (hand-written JSON-RPC: the SDK cannot send garbage).

    python tests/support/mcp_garbage_server.py --log FILE
"""

from __future__ import annotations

import argparse
import json
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "garbage", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/list":
            tool = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"}}
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [tool]}})
        elif method == "tools/call":
            with open(args.log, "a", encoding="utf-8") as handle:
                handle.write("garbage-call\n")
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": "no list", "isError": 7}})
        else:
            error = {"code": -32601, "message": f"unknown method {method}"}
            send({"jsonrpc": "2.0", "id": ident, "error": error})


if __name__ == "__main__":
    main()
