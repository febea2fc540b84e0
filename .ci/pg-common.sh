# Shared by .ci/postgres.sh and .ci/pgvector.sh (sourced, not run): the test role and database.
# The caller defines psql_admin (psql as the server's superuser) and sets ROLE and DATABASE.

# The role's password, made once and kept in the root-only file $1; printed.
test_password() {
    if [ ! -s "$1" ]; then
        (umask 077 && head -c 18 /dev/urandom | base64 | tr '+/' '-_' >"$1")
    fi
    cat "$1"
}

# The login role with password $1, and the database it owns.
test_role_and_database() {
    psql_admin -d postgres -v role="$ROLE" -v password="$1" >&2 <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
ALTER ROLE :"role" LOGIN PASSWORD :'password';
SQL
    psql_admin -d postgres -v role="$ROLE" -v db="$DATABASE" >&2 <<'SQL'
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
}
