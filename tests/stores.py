"""The stores a test can run on: SQLite always, PostgreSQL when the server is there.

``MEMSEAL_TEST_POSTGRES`` (set by ``.ci/postgres.sh``) names a database; each
PostgreSQL case gets a schema of its own, made on first open and dropped
after the test. The ``store_url`` fixture (tests/conftest.py) parametrises a
test by adapter: ``None`` for the folder's SQLite file, else the URL.
"""

from __future__ import annotations

import os
import secrets

POSTGRES = os.environ.get("MEMSEAL_TEST_POSTGRES") or None
ADAPTERS = ["sqlite", *(["postgresql"] if POSTGRES else [])]


def fresh_url(prefix: str = "t") -> tuple[str, str]:
    """A URL naming a new schema in the test database, and the schema's name."""
    assert POSTGRES, "MEMSEAL_TEST_POSTGRES is not set"
    schema = f"{prefix}_{secrets.token_hex(6)}"
    joiner = "&" if "?" in POSTGRES else "?"
    return f"{POSTGRES}{joiner}schema={schema}", schema


async def drop_schemas(schemas: list[str]) -> None:
    import psycopg
    from psycopg import sql

    assert POSTGRES
    async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
        await conn.execute("SET client_min_messages TO warning")
        for schema in schemas:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
