#!/usr/bin/env bash
# Sets up the runtime (idempotently) and starts the web UI on the embedded SQLite journal.
# Usage: bash scripts/start.sh [--host H] [--port P]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_setup.sh
ensure_venv requirements.txt
exec "$VENV/bin/python" run_ui.py "$@"
