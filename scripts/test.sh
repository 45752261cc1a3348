#!/usr/bin/env bash
# Sets up everything the test suite needs (idempotently) and runs it.
# Usage: bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_setup.sh

apt_need=()
[ -x /usr/bin/chromium ] || apt_need+=(chromium)
apt_install "${apt_need[@]}"

ensure_venv requirements-dev.txt

set +e
"$VENV/bin/python" -m pytest -n "${A0_TEST_WORKERS:-2}" --dist loadgroup "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit "$rc"
