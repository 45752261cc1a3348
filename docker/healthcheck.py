"""The image's HEALTHCHECK: exit 0 when /api/health answers {"ok": true} on WEB_UI_PORT."""

from __future__ import annotations

import json
import os
import sys
import urllib.request


def main() -> int:
    port = os.environ.get("WEB_UI_PORT") or "80"
    url = f"http://127.0.0.1:{port}/api/health"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(url, timeout=4) as response:
            healthy = json.load(response).get("ok") is True
    except (OSError, ValueError) as e:
        print(f"unhealthy: {url}: {e}", file=sys.stderr)
        return 1
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
