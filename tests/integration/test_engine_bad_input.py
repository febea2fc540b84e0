"""Every bad input to the engine is an InvalidRequest naming the field, and appends nothing.

Covered: unknown kinds, bad namespaces, limits out of range, malformed or foreign cursors,
bad dates and times (filters, observed_at, refers_to), malformed content, tags, metadata,
trust levels, ids, modes, facets, reach and zone arguments, and forget without a target.
After each refusal the ledger head and the projection state hash are what they were.
Case by case on SQLite; then every case in turn against one engine on each store (the
folder's SQLite file, and PostgreSQL when the test server is there).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memseal.cli.engine import open_engine
from memseal.engine import Conversation, Engine, HashingEmbedder, Learning, Turn
from memseal.ledger.errors import InvalidRequest

PLACE = "team:acme/agent:writer"
Call = Callable[[Engine], Awaitable[Any]]


def store(content: object, **extra: Any) -> Call:
    # Each call gets its own copy of ``extra``: a case runs once per store.
    def call(e: Engine) -> Awaitable[Any]:
        options = dict(extra)
        return e.store(content, namespace=options.pop("namespace", PLACE), **options)

    return call


CASES: list[tuple[str, Call, str]] = [
    # unknown kinds
    (
        "learning kind",
        store(Learning(text="x", kind="memo")),
        "`learning.learning_kind` is not a learning kind",
    ),
    (
        "json learning kind",
        store({"learning": {"text": "x", "learning_kind": "memo"}}),
        "`learning.learning_kind`",
    ),
    (
        "filter kind",
        lambda e: e.list(filter={"kinds": ["memo"]}),
        "`filter.kinds[0]` is not an item kind",
    ),
    ("empty kinds", lambda e: e.list(filter={"kinds": []}), "`filter.kinds`"),
    # content
    ("two contents", store({"learning": {"text": "x"}, "document": {"text": "y"}}), "exactly one"),
    ("unknown content", store({"memo": {"text": "x"}}), "unknown field `memo`"),
    ("no content", store(None), "`content`"),
    ("empty text", store(Learning(text="   ")), "`learning.text` must not be empty"),
    ("text type", store({"learning": {"text": 5}}), "`learning.text`"),
    ("nul in text", store(Learning(text="a\x00b")), "`learning.text` contains a control"),
    ("text too long", store(Learning(text="x" * 16_001)), "`learning.text` is 16001 characters"),
    ("confidence", store(Learning(text="x", confidence=1.5)), "`learning.confidence`"),
    ("confidence nan", store(Learning(text="x", confidence=float("nan"))), "`learning.confidence`"),
    (
        "unknown learning key",
        store({"learning": {"text": "x", "namespace": "team:x"}}),
        "`learning`: object contains unknown field `namespace`",
    ),
    ("no turns", store(Conversation(turns=())), "`conversation.turns`"),
    (
        "bad role",
        store(Conversation(turns=(Turn(role="User!", text="x"),))),
        "`conversation.turns[0].role`",
    ),
    ("title", store({"document": {"text": "x", "title": "t" * 501}}), "`document.title`"),
    # namespaces
    ("namespace", store(Learning(text="x"), namespace="Team:acme"), "`namespace`"),
    ("namespace slash", store(Learning(text="x"), namespace="team:acme/"), "`namespace`"),
    ("namespace type", store(Learning(text="x"), namespace=7), "`namespace`"),
    # tags, meta, trust, sources, observed_at
    ("tags str", store(Learning(text="x"), tags="ui"), "`tags` must be a list"),
    ("tags many", store(Learning(text="x"), tags=[f"t{i}" for i in range(33)]), "`tags` lists 33"),
    ("tag empty", store(Learning(text="x"), tags=["ok", " "]), "`tags[1]` must not be empty"),
    ("tag newline", store(Learning(text="x"), tags=["a\nb"]), "`tags[0]` must be one line"),
    (
        "meta unknown",
        store(Learning(text="x"), meta={"colour": "red"}),
        "`meta`: object contains unknown field `colour`",
    ),
    ("meta type", store(Learning(text="x"), meta={"repo": 3}), "`meta.repo`: expected"),
    (
        "meta source",
        store(Learning(text="x"), meta={"source": {"kind": "Bad Kind"}}),
        "`meta.source.kind`",
    ),
    ("trust", store(Learning(text="x"), trust="super"), "`trust`"),
    (
        "trust rejected",
        store(Learning(text="x"), trust="rejected"),
        "`trust`: an item cannot be stored rejected",
    ),
    ("sources", store(Learning(text="x"), sources="abc"), "`sources` must be a list"),
    (
        "observed word",
        store(Learning(text="x"), observed_at="yesterday"),
        "`observed_at` is not an RFC 3339",
    ),
    (
        "observed month",
        store(Learning(text="x"), observed_at="2026-13-01T00:00:00Z"),
        "`observed_at`",
    ),
    (
        "observed naive",
        store(Learning(text="x"), observed_at=datetime(2026, 1, 1)),
        "`observed_at` must carry a time zone",
    ),
    # limits
    ("limit zero", lambda e: e.list(limit=0), "`limit` must be an integer from 1 to 50"),
    ("limit 51", lambda e: e.fetch("x", limit=51), "`limit`"),
    ("limit text", lambda e: e.explore("kind", limit="10"), "`limit`"),  # type: ignore[arg-type]
    ("limit bool", lambda e: e.recall("x", limit=True), "`limit`"),
    ("ids none", lambda e: e.get([]), "`ids` must list 1 to 200"),
    ("ids many", lambda e: e.get([f"i{n}" for n in range(201)]), "`ids` must list 1 to 200"),
    ("ids type", lambda e: e.get([1]), "`ids[0]`"),  # type: ignore[list-item]
    ("ids str", lambda e: e.get("abc"), "`ids` must be a list"),
    # cursors
    ("cursor junk", lambda e: e.list(cursor="%%%"), "`cursor` is malformed"),
    ("cursor b64", lambda e: e.fetch("x", cursor="bm90IGpzb24"), "`cursor` is malformed"),
    ("cursor type", lambda e: e.list(cursor=12), "`cursor` is malformed"),  # type: ignore[arg-type]
    # dates and filters
    ("after", lambda e: e.list(filter={"observed_after": "last week"}), "`filter.observed_after`"),
    (
        "before",
        lambda e: e.fetch("x", filter={"observed_before": "2026-02-30T00:00:00Z"}),
        "`filter.observed_before`",
    ),
    (
        "after>=before",
        lambda e: e.list(
            filter={
                "observed_after": "2026-02-01T00:00:00Z",
                "observed_before": "2026-01-01T00:00:00Z",
            }
        ),
        "`filter.observed_after` must be before",
    ),
    (
        "filter namespace",
        lambda e: e.list(filter={"namespace": "team:x"}),
        "`filter`: object contains unknown field `namespace`",
    ),
    ("filter type", lambda e: e.list(filter=["kinds"]), "`filter`"),  # type: ignore[arg-type]
    (
        "refers_to date",
        lambda e: e.fetch("x", refers_to={"from": "2026-13-01", "to": "2026-12-01"}),
        "`refers_to.from`",
    ),
    (
        "refers_to order",
        lambda e: e.fetch("x", refers_to={"from": "2026-12-02", "to": "2026-12-01"}),
        "`refers_to.from` must not be after",
    ),
    (
        "refers_to missing",
        lambda e: e.recall("x", refers_to={"from": "2026-12-01"}),
        "`refers_to`: object missing required field `to`",
    ),
    (
        "refers_to word",
        lambda e: e.fetch("x", refers_to={"from": "today", "to": "today"}),
        "`refers_to.from`",
    ),
    # trust floors, modes, facets, queries, reach, zone
    ("min_trust rejected", lambda e: e.fetch("x", min_trust="rejected"), "`min_trust`"),
    ("min_trust word", lambda e: e.get(["a"], min_trust="high"), "`min_trust`"),  # type: ignore[arg-type]
    ("mode", lambda e: e.fetch("x", mode="fuzzy"), "`mode`"),  # type: ignore[arg-type]
    ("facet", lambda e: e.explore("namespace"), "`facet`"),
    ("query empty", lambda e: e.fetch("  "), "`query` must not be empty"),
    ("query long", lambda e: e.fetch("q" * 2001), "`query`"),
    ("instructions", lambda e: e.recall("x", instructions=5), "`instructions`"),  # type: ignore[arg-type]
    ("reach str", lambda e: e.list(reach="team:acme"), "`reach` must be a Reach"),  # type: ignore[arg-type]
    ("zone str", lambda e: e.fetch("x", zone="UTC"), "`zone`"),  # type: ignore[arg-type]
    # forget
    ("forget nothing", lambda e: e.forget(), "exactly one of `ids` or `filter`"),
    ("forget both", lambda e: e.forget(ids=["a"], filter={"kinds": ["fact"]}), "exactly one"),
    ("forget empty filter", lambda e: e.forget(filter={}), "`filter` must set at least one field"),
    ("forget bad filter", lambda e: e.forget(filter={"kinds": ["memo"]}), "`filter.kinds[0]`"),
    ("forget ids", lambda e: e.forget(ids=[]), "`ids`"),
    # trust changes
    ("promote id", lambda e: e.promote(5, actor="a", reason="b"), "`id`"),  # type: ignore[arg-type]
    ("reject actor", lambda e: e.reject("abc", actor=" ", reason="b"), "`actor`"),
]


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    async with open_engine(tmp_path / "data", create=True, embedder=HashingEmbedder()) as opened:
        await opened.store(Learning(text="an item that exists"), namespace=PLACE)
        yield opened
        await opened.ledger.verify()


@pytest.mark.parametrize(("name", "call", "field"), CASES, ids=[c[0] for c in CASES])
async def test_bad_input_is_refused_naming_the_field_and_appends_nothing(
    engine: Engine, name: str, call: Call, field: str
) -> None:
    head = await engine.ledger.head()
    state = await engine.state_hash()
    with pytest.raises(InvalidRequest) as caught:
        await call(engine)
    assert field in str(caught.value), f"{name}: {caught.value}"
    assert str(caught.value) == str(caught.value).strip()
    assert await engine.ledger.head() == head
    assert await engine.state_hash() == state


async def test_every_case_is_refused_on_each_store(tmp_path: Path, store_url: str | None) -> None:
    # One engine for all the cases (a fresh PostgreSQL schema per case would cost more than
    # the cases do); each refusal is checked to leave the head and the state as they were.
    async with open_engine(
        tmp_path / "data", create=True, embedder=HashingEmbedder(), store=store_url
    ) as engine:
        await engine.store(Learning(text="an item that exists"), namespace=PLACE)
        for name, call, field in CASES:
            head = await engine.ledger.head()
            state = await engine.state_hash()
            with pytest.raises(InvalidRequest) as caught:
                await call(engine)
            assert field in str(caught.value), f"{name}: {caught.value}"
            assert await engine.ledger.head() == head, name
            assert await engine.state_hash() == state, name
        await engine.ledger.verify()
