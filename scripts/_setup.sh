# Shared by scripts/start.sh and scripts/test.sh: idempotent installs.
VENV="${A0_VENV:-.venv}"
PY="${PYTHON:-python3}"

apt_install() {
  [ "$#" -gt 0 ] || return 0
  echo "installing system packages: $*" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@"
}

ensure_venv() {
  local req="$1"
  if ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    apt_install python3-venv
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
