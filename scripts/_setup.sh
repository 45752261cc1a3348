# Shared by scripts/start.sh and scripts/test.sh: idempotent installs.
VENV="${A0_VENV:-.venv}"
# A Python 3.11+ whose sqlite3 can load extensions (sqlite-vec, the memory search: docs/memory.md).
# Debian's python3 can; many pyenv builds cannot (built without --enable-loadable-sqlite-extensions),
# so $PYTHON, then python3, then Debian's /usr/bin/python3 are tried in that order.
_can_load_extensions='import sqlite3, sys; sys.exit(0 if sys.version_info >= (3, 11) and hasattr(sqlite3.connect(":memory:"), "enable_load_extension") else 1)'
pick_python() {
  local cand
  for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1 || continue
    if "$cand" -c "$_can_load_extensions" >/dev/null 2>&1; then echo "$cand"; return; fi
  done
  echo "${PYTHON:-python3}"  # none can: memory search reports itself unavailable
}
PY=$(pick_python)

apt_install() {
  [ "$#" -gt 0 ] || return 0
  echo "installing system packages: $*" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  # apt is shared: wait for another apt or dpkg to finish instead of failing at once
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@"
}

ensure_venv() {
  local req="$1"
  if ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    apt_install python3-venv
  fi
  # a venv made from a Python that cannot load SQLite extensions is made again from one that can
  if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c "$_can_load_extensions" >/dev/null 2>&1 \
    && "$PY" -c "$_can_load_extensions" >/dev/null 2>&1; then
    echo "recreating $VENV with $PY (its sqlite3 can load extensions)" >&2
    rm -rf "$VENV"
  fi
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  local stamp="$VENV/.installed-$(basename "$req")"
  local want
  want=$(cat requirements*.txt | sha256sum | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -r "$req"
    echo "$want" > "$stamp"
  fi
}
