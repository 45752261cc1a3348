#!/usr/bin/env bash
# Sets up everything the test suite needs (idempotently) and runs it.
# Usage: bash scripts/test.sh            the whole suite
#        bash scripts/test.sh ARGS...    pytest ARGS (e.g. a path or -m integration)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_setup.sh

apt_need=()
[ -x /usr/bin/chromium ] || apt_need+=(chromium)
# The container tests (tests/docker, docs/docker.md): Debian's Docker engine and client,
# debootstrap for the base image, a Compose implementation, ip for the test bridge.
{ [ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ]; } || apt_need+=(docker.io)
[ -x /usr/sbin/debootstrap ] || apt_need+=(debootstrap)
command -v docker-compose >/dev/null 2>&1 || /usr/bin/docker compose version >/dev/null 2>&1 \
  || apt_need+=(docker-compose)
command -v ip >/dev/null 2>&1 || apt_need+=(iproute2)
# The SSH execution tests run a private sshd (tests/support/sshd.py).
{ [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null 2>&1; } || apt_need+=(openssh-server)
# The PostgreSQL tests start private clusters from these binaries (tests/support/postgres.py).
[ -n "${A0_TEST_POSTGRES_DSN:-}" ] || [ -x /usr/lib/postgresql/15/bin/initdb ] || apt_need+=(postgresql)
apt_install "${apt_need[@]}"

ensure_venv requirements-dev.txt

# pytest's exit code 5 (no test collected) must never pass silently.
run_pytest() {
  local rc=0
  "$VENV/bin/python" -m pytest "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests for: $* (failing on purpose)" >&2
    return 1
  fi
  return "$rc"
}

if [ "$#" -gt 0 ]; then
  run_pytest "$@"
  exit $?
fi

# Playwright's sync API leaves an event loop running in its worker process, which breaks
# the asyncio tests that would follow it there: browser tests get a pytest session of
# their own. The container tests get one too, in a single process: they build the image
# once (on a private dockerd) and share it.
rc=0
run_pytest -n "${A0_TEST_WORKERS:-2}" --dist loadgroup -m "not browser and not docker" || rc=$?
run_pytest -n "${A0_TEST_WORKERS:-2}" -m browser || rc=$?
run_pytest -m docker || rc=$?
exit "$rc"
