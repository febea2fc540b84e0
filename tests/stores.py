"""The stores a test can run on: SQLite always, PostgreSQL when the server is there.

``MEMSEAL_TEST_POSTGRES`` (set by ``.ci/postgres.sh``) names a database without
pgvector, ``MEMSEAL_TEST_PGVECTOR`` (``.ci/pgvector.sh``) one with it, where
semantic ranking runs in the database. Each PostgreSQL case gets a schema of
its own, made on first open and dropped after the test. The ``store_url``
fixture (tests/conftest.py) parametrises a test by adapter: ``None`` for the
folder's SQLite file, else the URL.
"""

from __future__ import annotations

import os
import secrets

POSTGRES = os.environ.get("MEMSEAL_TEST_POSTGRES") or None
PGVECTOR = os.environ.get("MEMSEAL_TEST_PGVECTOR") or None
ADAPTERS = [
    "sqlite",
    *(["postgresql"] if POSTGRES else []),
    *(["pgvector"] if PGVECTOR else []),
]


def server_for(adapter: str = "postgresql") -> str:
    server = PGVECTOR if adapter == "pgvector" else POSTGRES
    assert server, f"no test server for {adapter} (see tests/stores.py)"
    return server


def fresh_url(prefix: str = "t", adapter: str = "postgresql") -> tuple[str, str]:
    """A URL naming a new schema in a test database, and the schema's name."""
    server = server_for(adapter)
    schema = f"{prefix}_{secrets.token_hex(6)}"
    joiner = "&" if "?" in server else "?"
    return f"{server}{joiner}schema={schema}", schema


async def drop_schemas(schemas: list[str], adapter: str = "postgresql") -> None:
    import psycopg
    from psycopg import sql

    server = server_for(adapter)
    async with await psycopg.AsyncConnection.connect(server, autocommit=True) as conn:
        await conn.execute("SET client_min_messages TO warning")
        for schema in schemas:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
