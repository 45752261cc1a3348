#!/usr/bin/env bash
# Creates bench/.venv-peers: the peer frameworks bench/peers.py compares us with (DBOS,
# LangGraph's SqliteSaver). Bench-only: never part of the default install. Idempotent.
# Usage: bash bench/setup_peers.sh
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
VENV=.venv-peers
stamp="$VENV/.installed"
want=$(sha256sum requirements-peers.txt | cut -d' ' -f1)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -r requirements-peers.txt
  echo "$want" > "$stamp"
fi
echo "peers venv ready: bench/$VENV/bin/python"
