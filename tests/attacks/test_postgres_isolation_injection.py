"""PostgreSQL isolation and injection, over the real HTTP service, on every store.

Fifteen look-alike namespaces (``team:acme``, ``team:acme-corp``,
``team:acme_``, ``team:acm``, ``team:ACME``...: the ones a string prefix, a
``LIKE`` wildcard or a case fold would mix up) each store a secret; an agent
placed at each one reads with every read tool (fetch exact, semantic and
hybrid, list, get by every id, explore, recall) and sees its own secret and no
other. Places a ``LIKE`` or SQL string could be bent by (``team:acme%``,
``team:acme\\``, quotes) are refused when the token is made.

Then about thirty SQL-injection and tsquery-syntax strings go through every
text field of every tool (query, question, instructions, text, title, tags,
every filter field, cursor, ids): each answer is a 2xx, or a 4xx in the error
shape, no other tenant's secret ever appears, and afterwards the store's tables
are all there with every entry, and the ledger and its derived tables verify.

Every meta field takes every string on fetch, one field in turn on list and
explore; ``MEMSEAL_INJECTION_FULL=1`` sends every field everywhere. Each test
runs on each store (SQLite, and PostgreSQL with and without
pgvector when their test servers are set, see tests/stores.py).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from _scale import SCALE
from integration.test_service_support import ServerThread
from stores import ADAPTERS, drop_schemas, fresh_url

import memseal
from memseal.engine.embedders import HashingEmbedder
from memseal.errors import InvalidRequest

LOOK_ALIKES = (
    "team:acme",
    "team:acme-corp",
    "team:acme_",
    "team:acm",
    "team:ACME",
    "team:Acme",
    "team:acme.",
    "team:acme.corp",
    "team:acme@x",
    "team:acme+1",
    "team:acme=",
    "team:acme-",
    "team:acmeco",
    "team:acme2",
    "teams:acme",
)
# Not namespaces at all: refused as places, so no token ever carries one into SQL.
BAD_PLACES = (
    "team:acme%",
    "team:acme\\",
    "team:acme*",
    "team:acme'",
    "team:acme' OR '1'='1",
    "team:acme/",
    "team:acme/%",
    "team:acme\u0000",
)
INJECTIONS = (
    "' OR 1=1 --",
    "' OR '1'='1",
    '" OR ""="',
    "'); DROP TABLE entries; --",
    "1; DROP TABLE payloads",
    "x'; DELETE FROM tree; --",
    "' UNION SELECT leaf, hash, sig, seq FROM entries --",
    "team:acme%",
    "%",
    "_",
    "%%",
    "\\",
    "\\%",
    "a & b | !c",
    "foo:*",
    "<->",
    "a <-> b",
    "!",
    "(",
    "'' & ''",
    "vault:* & !sekrit",
    "$$ || pg_sleep(5) || $$",
    "E'\\x00'",
    "/* */ SELECT 1",
    "-- ",
    "\u202e'evil",
    "İstanbul ẞ ﬁ",
    "😀 vault 😀",
    "\ud7ff\ue000",
    "a" * 400,
)
TOOLS = (
    "memory_fetch",
    "memory_list",
    "memory_get",
    "memory_explore",
    "memory_recall",
    "memory_store",
    "memory_forget",
)
FULL = os.environ.get("MEMSEAL_INJECTION_FULL") == "1" or SCALE > 1
META_FIELDS = ("workspace", "folder", "file_path", "repo", "url", "thread_id", "agent_id")


@dataclass
class Tenant:
    place: str
    secret: str
    item: str
    client: httpx.Client


@dataclass
class Service:
    server: ServerThread
    store_url: str | None
    tenants: list[Tenant]

    def others(self, place: str) -> list[str]:
        return [t.secret for t in self.tenants if t.place != place]


@pytest.fixture(scope="module", params=ADAPTERS)
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """One server per store for the module (the injection test, last, stops it)."""
    adapter: str = request.param
    url, schema = (None, None) if adapter == "sqlite" else fresh_url("iso", adapter)
    folder = tmp_path_factory.mktemp("isolation") / "data"
    try:
        with ServerThread(folder, store=url, embedder=HashingEmbedder()) as server:
            tenants: list[Tenant] = []
            try:
                for place in LOOK_ALIKES:
                    secret = f"sekrit{secrets.token_hex(8)}"
                    client = server.client(server.token("agent", place))
                    tenants.append(Tenant(place, secret, "", client))
                    stored = ok(
                        client,
                        "memory_store",
                        {"learning": {"text": f"the vault code is {secret}"}, "tags": [secret]},
                    )
                    tenants[-1].item = stored["id"]
                yield Service(server, url, tenants)
            finally:
                for tenant in tenants:
                    tenant.client.close()
    finally:
        if schema is not None:
            asyncio.run(drop_schemas([schema], adapter))


def call(client: httpx.Client, tool: str, args: dict[str, Any]) -> httpx.Response:
    response = client.post(f"/v1/tools/{tool}", json=args)
    if not (200 <= response.status_code < 300 or 400 <= response.status_code < 500):
        raise AssertionError(f"{tool} {args!r}: {response.status_code} {response.text[:300]}")
    if response.status_code >= 400:
        error = response.json().get("error")
        assert isinstance(error, dict) and set(error) == {"code", "message"}, response.text
        assert isinstance(error["message"], str) and error["message"], response.text
    return response


def ok(client: httpx.Client, tool: str, args: dict[str, Any]) -> Any:
    response = call(client, tool, args)
    assert response.status_code == 200, (tool, args, response.text)
    return response.json()["result"]


def leaked(response: httpx.Response, others: list[str]) -> list[str]:
    return [secret for secret in others if secret in response.text]


def reads(tenant: Tenant, ids: list[str]) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("memory_fetch", {"query": "vault code", "mode": "exact"}),
        ("memory_fetch", {"query": "vault code", "mode": "semantic"}),
        ("memory_fetch", {"query": "vault code", "mode": "hybrid"}),
        ("memory_fetch", {"query": tenant.secret, "mode": "exact"}),
        ("memory_list", {"limit": 50, "filter": {"tags_any": [tenant.secret]}}),
        ("memory_get", {"ids": ids}),
        ("memory_explore", {"facet": "tag", "limit": 50}),
        ("memory_explore", {"facet": "kind"}),
        ("memory_recall", {"question": "What is the vault code?", "limit": 50}),
    ]


async def test_look_alike_namespaces_each_see_only_their_own_secret(service: Service) -> None:
    ids = [t.item for t in service.tenants]
    problems: list[str] = []
    for tenant in service.tenants:
        others = service.others(tenant.place)
        for tool, args in reads(tenant, ids):
            response = call(tenant.client, tool, args)
            where = f"{tenant.place} {tool} {args.get('mode') or args.get('facet') or ''}"
            if response.status_code != 200:
                problems.append(f"{where}: {response.status_code} {response.text[:200]}")
            elif args.get("facet", "tag") == "tag" and tenant.secret not in response.text:
                problems.append(f"{where}: its own secret is missing")
            if found := leaked(response, others):
                owners = [t.place for t in service.tenants if t.secret in found]
                problems.append(f"{where}: sees the secrets of {owners}")
        # The one id of its own is the only one served.
        got = ok(tenant.client, "memory_get", {"ids": ids})
        assert [item["id"] for item in got["items"]] == [tenant.item], tenant.place
    assert not problems, "\n".join(problems)


def test_places_sql_could_be_bent_by_are_refused() -> None:
    # scope_from validates the place before any token (or any SQL) exists.
    from memseal.service.tokens import scope_from

    for place in BAD_PLACES:
        with pytest.raises(InvalidRequest, match="place"):
            scope_from(role="agent", place=place)


def hostile_calls(n: int, text: str) -> list[tuple[str, dict[str, Any]]]:
    # Every meta field at once on fetch; one in turn on list and explore (the same
    # filter code, and a filter over every field is the slow part of the file) unless
    # MEMSEAL_INJECTION_FULL=1.
    every_meta = {field: text for field in META_FIELDS}
    one_meta = every_meta if FULL else {META_FIELDS[n % len(META_FIELDS)]: text}
    return [
        # Hybrid runs the query through the word index and the vector path both.
        ("memory_fetch", {"query": text, "mode": "hybrid"}),
        ("memory_fetch", {"query": "vault", "mode": "exact", "cursor": text}),
        ("memory_fetch", {"query": "vault", "filter": {"tags_any": [text], **every_meta}}),
        ("memory_list", {"filter": {"tags_any": [text], **one_meta}}),
        ("memory_list", {"cursor": text}),
        ("memory_get", {"ids": [text]}),
        ("memory_explore", {"facet": "tag", "filter": {"tags_any": [text], **one_meta}}),
        ("memory_recall", {"question": text, "instructions": text}),
        ("memory_store", {"learning": {"text": text}, "tags": [text]}),
        ("memory_store", {"document": {"text": text, "title": text}}),
        ("memory_forget", {"ids": [text]}),
        ("memory_forget", {"filter": {"tags_any": [text]}}),
    ]


def tables(service: Service) -> dict[str, int]:
    """Every table of the store, with the row count of the log's own tables."""
    counted = {"entries", "payloads", "tree", "checkpoints", "redactions"}
    if service.store_url is None:
        with closing(sqlite3.connect(service.server.folder / "ledger.db")) as conn:
            names = [
                n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            return {
                n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] if n in counted else -1
                for n in names
            }
    import psycopg
    from psycopg import sql

    dsn, _, schema = service.store_url.rpartition("schema=")
    with psycopg.connect(dsn.rstrip("?&"), autocommit=True) as conn:
        names = [
            n
            for (n,) in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            )
        ]
        found: dict[str, int] = {}
        for n in names:
            if n in counted:
                query = sql.SQL("SELECT count(*) FROM {}.{}").format(
                    sql.Identifier(schema), sql.Identifier(n)
                )
                row = conn.execute(query).fetchone()
                assert row is not None
                found[n] = int(row[0])
            else:
                found[n] = -1
        return found


async def test_injection_strings_in_every_text_field_of_every_tool_reach_no_one_else(
    service: Service,
) -> None:
    before = tables(service)
    assert {"entries", "payloads", "tree"} <= set(before), before
    injector = next(t for t in service.tenants if t.place == "team:acm")
    others = service.others(injector.place)
    statuses: dict[str, set[int]] = {tool: set() for tool in TOOLS}
    problems: list[str] = []
    for n, text in enumerate(INJECTIONS):
        for tool, args in hostile_calls(n, text):
            response = call(injector.client, tool, args)
            statuses[tool].add(response.status_code)
            if found := leaked(response, others):
                problems.append(f"{tool} {args!r}: leaks {len(found)} secrets")
    assert not problems, "\n".join(problems)
    # Every tool took some of it (the strings are data, not refused wholesale).
    assert all(200 in codes for codes in statuses.values()), statuses
    after = tables(service)
    assert set(after) == set(before), (before, after)
    # The log only grew (the calls and stores above are signed entries).
    assert all(after[n] >= before[n] for n in ("entries", "payloads", "tree")), (before, after)
    # Everyone's secret is still theirs, and still only theirs.
    for tenant in service.tenants:
        found = ok(tenant.client, "memory_fetch", {"query": tenant.secret, "mode": "exact"})
        assert [hit["id"] for hit in found["hits"]] == [tenant.item], tenant.place
    service.server.__exit__(None, None, None)
    async with memseal.open(
        service.server.folder,
        store=service.store_url,
        embedder=HashingEmbedder(),
        checkpoint_interval=None,
    ) as memory:
        summary = await memory.ledger.verify(trust=memory.vkey)
        assert summary.size > after["entries"]  # the final fetches are signed too
        await memory.verify(deep=True)
