#!/usr/bin/env bash
# A PostgreSQL server on loopback for the PostgreSQL contract tests.
#
#   eval "$(.ci/postgres.sh)"      # sets MEMSEAL_TEST_POSTGRES
#
# Installs Debian's postgresql server if missing, then creates (once) and starts a cluster of
# its own, "memseal" on port 55432 (MEMSEAL_PG_CLUSTER, MEMSEAL_PG_PORT), listening on
# 127.0.0.1 only, with password (scram-sha-256) login for the role "memseal" over loopback TCP
# and peer login over the Unix socket. The role owns the database "memseal_test"; the tests
# make and drop one schema per test in it. Idempotent: a second run starts what is stopped and
# prints the same line. Everything but the export line goes to stderr. Needs root.
set -euo pipefail
# shellcheck source=.ci/pg-common.sh
. "$(dirname "$0")/pg-common.sh"

CLUSTER=${MEMSEAL_PG_CLUSTER:-memseal}
PORT=${MEMSEAL_PG_PORT:-55432}
ROLE=memseal
DATABASE=memseal_test

log() { printf 'postgres.sh: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    log "run me as root (apt-get, pg_createcluster)"
    exit 1
fi

if ! command -v pg_createcluster >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    log "installing Debian's postgresql server"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi

# The newest installed server version.
VERSION=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
CONF=/etc/postgresql/$VERSION/$CLUSTER

if [ ! -d "$CONF" ]; then
    log "creating cluster $VERSION/$CLUSTER on port $PORT"
    pg_createcluster "$VERSION" "$CLUSTER" --port "$PORT" --start-conf=manual \
        -- --auth-local=peer --auth-host=scram-sha-256 >&2
fi

# Enforced on every run, whatever the cluster's files say: loopback only (conf.d is read after
# postgresql.conf, so this wins), and our own pg_hba.
settings="$CONF/conf.d/memseal.conf"
wanted="# written by memseal .ci/postgres.sh
listen_addresses = '127.0.0.1'
port = $PORT"
if [ "$(cat "$settings" 2>/dev/null)" != "$wanted" ]; then
    printf '%s\n' "$wanted" >"$settings"
    chown postgres:postgres "$settings"
    # A running server picks listen_addresses up only on a restart.
    if pg_ctlcluster "$VERSION" "$CLUSTER" status >/dev/null 2>&1; then
        pg_ctlcluster "$VERSION" "$CLUSTER" restart >&2
    fi
fi
hba="$CONF/pg_hba.conf"
wanted="# written by memseal .ci/postgres.sh
local all all peer
host  all all 127.0.0.1/32 scram-sha-256"
if [ "$(cat "$hba")" != "$wanted" ]; then
    printf '%s\n' "$wanted" >"$hba"
    chown postgres:postgres "$hba"
    chmod 640 "$hba"
    pg_ctlcluster "$VERSION" "$CLUSTER" reload >&2 2>/dev/null || true
fi

status=0
pg_ctlcluster "$VERSION" "$CLUSTER" status >/dev/null 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    log "starting cluster $VERSION/$CLUSTER"
    pg_ctlcluster "$VERSION" "$CLUSTER" start >&2
fi
for _ in $(seq 1 60); do
    pg_isready -q -h 127.0.0.1 -p "$PORT" && break
    sleep 0.5
done
pg_isready -q -h 127.0.0.1 -p "$PORT" || { log "the server did not come up"; exit 1; }

psql_admin() { runuser -u postgres -- psql -X -q -At -v ON_ERROR_STOP=1 -p "$PORT" "$@"; }

# ALTER SYSTEM (postgresql.auto.conf) would override conf.d: check what the server really does.
listening=$(psql_admin -d postgres -c "SHOW listen_addresses")
if [ "$listening" != "127.0.0.1" ]; then
    log "listen_addresses is '$listening'; resetting it to loopback and restarting"
    psql_admin -d postgres -c "ALTER SYSTEM RESET listen_addresses" >&2
    pg_ctlcluster "$VERSION" "$CLUSTER" restart >&2
    listening=$(psql_admin -d postgres -c "SHOW listen_addresses")
    if [ "$listening" != "127.0.0.1" ]; then
        pg_ctlcluster "$VERSION" "$CLUSTER" stop >&2
        log "cannot keep the server on loopback (listen_addresses '$listening'); stopped it"
        exit 1
    fi
fi
# The role's password is made once and kept beside the cluster's config (root-only).
password=$(test_password "$CONF/memseal-test.password")
test_role_and_database "$password"

echo "export MEMSEAL_TEST_POSTGRES=postgresql://$ROLE:$password@127.0.0.1:$PORT/$DATABASE"
