#!/bin/sh
# Entry point of the test PostgreSQL image (tests/docker/postgres/Dockerfile).
# As root: hand the data folder to "postgres" and start again as that user. As postgres:
# make the cluster on first start (superuser POSTGRES_USER with POSTGRES_PASSWORD, database
# POSTGRES_DB, scram logins from any address), then run the server as PID 1.
set -eu

: "${PGDATA:=/var/lib/postgresql/data}"
user="${POSTGRES_USER:-postgres}"
database="${POSTGRES_DB:-$user}"

if [ "$(id -u)" = "0" ]; then
    mkdir -p "$PGDATA" /run/postgresql
    chown -R postgres:postgres "$PGDATA" /run/postgresql
    chmod 0700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups -- /bin/sh "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "POSTGRES_PASSWORD is empty: refusing to initialise the database" >&2
        exit 1
    fi
    password_file="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$password_file"
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$password_file" \
        --encoding=UTF8 --no-locale --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$password_file"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    # The database, made through a private socket: until the real server runs, neither the
    # network nor pg_isready (the health check, on /run/postgresql) sees a server.
    socket_dir="$(mktemp -d)"
    pg_ctl --pgdata="$PGDATA" --wait --silent \
        -o "-c listen_addresses='' -c unix_socket_directories=$socket_dir" start
    if [ "$database" != "postgres" ]; then
        createdb --username="$user" --host="$socket_dir" "$database"
    fi
    pg_ctl --pgdata="$PGDATA" --wait --silent --mode=fast stop
    rmdir "$socket_dir"
    echo "initialised the database $database for $user"
fi

exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/run/postgresql
