#!/bin/sh
# Container entry point (PID 1 is tini). Started as root (the default): give the data folder
# to the server's user "a0", then drop every privilege and run the command as a0.
# Started with --user: run the command as that user, untouched.
set -eu

usr_dir="${A0_USR_DIR:-/a0/usr}"

if [ "$(id -u)" = "0" ]; then
    mkdir -p "$usr_dir"
    # Only what is not a0's yet (a fresh bind mount, files written by `docker exec` as
    # root); -h changes a link itself, never what it points to.
    find "$usr_dir" \( ! -user a0 -o ! -group a0 \) -exec chown -h a0:a0 {} +
    exec setpriv --reuid=a0 --regid=a0 --init-groups --inh-caps=-all --bounding-set=-all \
        --no-new-privs -- "$@"
fi
exec "$@"
