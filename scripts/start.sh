#!/usr/bin/env bash
# Sets up the runtime (idempotently) and starts the web UI on the embedded SQLite journal.
# Usage: bash scripts/start.sh [--host H] [--port P]
#        A0_WITH_DOCUMENTS=1 bash scripts/start.sh   also the documents extra (requirements-documents.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_setup.sh
ensure_venv requirements.txt
if [ "${A0_WITH_DOCUMENTS:-0}" = "1" ]; then ensure_venv requirements-documents.txt; fi
exec "$VENV/bin/python" run_ui.py "$@"
