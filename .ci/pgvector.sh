#!/usr/bin/env bash
# A second PostgreSQL server on loopback, with the pgvector extension, for the pgvector path.
#
#   eval "$(.ci/pgvector.sh)"      # sets MEMSEAL_TEST_PGVECTOR
#
# Debian's archive carries no pgvector package, so the server comes from the pgserver wheel on
# PyPI (PostgreSQL 16 built with pgvector, manylinux): its binaries are unpacked to
# /opt/memseal-pgvector (MEMSEAL_PGVECTOR_HOME), a cluster is made in
# /var/lib/memseal-pgvector owned by the "postgres" system user (.ci/postgres.sh installs
# Debian's server first, which creates that user) and started on 127.0.0.1:55433
# (MEMSEAL_PGVECTOR_PORT). The role "memseal" logs in with a password over loopback TCP and owns
# the database "memseal_test", in which the extension is created (by the superuser: memseal
# itself never creates extensions, it uses one that is there). Idempotent; everything but the
# export line goes to stderr. Needs root.
set -euo pipefail
# shellcheck source=.ci/pg-common.sh
. "$(dirname "$0")/pg-common.sh"

HOME_DIR=${MEMSEAL_PGVECTOR_HOME:-/opt/memseal-pgvector}
PORT=${MEMSEAL_PGVECTOR_PORT:-55433}
WHEEL=pgserver==0.1.4
DATA=/var/lib/memseal-pgvector/data
RUN=/var/lib/memseal-pgvector/run
ROLE=memseal
DATABASE=memseal_test
PYTHON=${PYTHON:-python3}

log() { printf 'pgvector.sh: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    log "run me as root"
    exit 1
fi
if ! id postgres >/dev/null 2>&1; then
    log "no postgres system user: run .ci/postgres.sh first"
    exit 1
fi

BIN=$HOME_DIR/pgserver/pginstall/bin
if [ ! -x "$BIN/postgres" ]; then
    log "fetching PostgreSQL with pgvector ($WHEEL)"
    tmp=$(mktemp -d)
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: "$WHEEL" -d "$tmp" >&2
    mkdir -p "$HOME_DIR"
    "$PYTHON" -m zipfile -e "$tmp"/pgserver-*.whl "$HOME_DIR" >&2
    rm -rf "$tmp"
    # zipfile drops the execute bits; the server runs as postgres and must read everything.
    chmod -R a+rX "$HOME_DIR"
    chmod a+x "$BIN"/*
fi

as_pg() { runuser -u postgres -- "$@"; }

if [ ! -f "$DATA/PG_VERSION" ]; then
    log "creating the cluster in $DATA"
    mkdir -p "$DATA" "$RUN"
    chown postgres:postgres "$(dirname "$DATA")" "$DATA" "$RUN"
    chmod 700 "$DATA"
    as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth-local=peer --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 >&2
fi
cat >"$DATA/postgresql.auto.conf" <<EOF
# written by memseal .ci/pgvector.sh
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$RUN'
EOF
chown postgres:postgres "$DATA/postgresql.auto.conf"
printf '%s\n' "local all all peer" "host all all 127.0.0.1/32 scram-sha-256" >"$DATA/pg_hba.conf"
chown postgres:postgres "$DATA/pg_hba.conf"

if ! as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    log "starting the server on 127.0.0.1:$PORT"
    as_pg "$BIN/pg_ctl" -D "$DATA" -l "$(dirname "$DATA")/server.log" -w start >&2
else
    as_pg "$BIN/pg_ctl" -D "$DATA" reload >&2
fi

psql_admin() { as_pg "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$RUN" -p "$PORT" "$@"; }
password=$(test_password "$(dirname "$DATA")/memseal-test.password")
test_role_and_database "$password"
psql_admin -d "$DATABASE" -c "CREATE EXTENSION IF NOT EXISTS vector" >&2

echo "export MEMSEAL_TEST_PGVECTOR=postgresql://$ROLE:$password@127.0.0.1:$PORT/$DATABASE"
