"""One history, two stores, one memory: SQLite and PostgreSQL end in the same state.

The same writes (stores of every content kind across namespaces, trust
changes, forgets by id and by filter, a store again after its forget, and a
durable run's tool calls) go to a data folder on SQLite and to a second
folder holding a copy of the first one's keys, its log on PostgreSQL. Both
are signed by the same key and get the same item ids (an id is keyed with
the instance secret), with the same clock readings. Then:

* the projection state hash is the same on both, kept incrementally and
  after ``rebuild()`` (which reaches it again);
* ``list``, ``get`` and ``explore`` (every facet) return equal results,
  item for item, under several reaches, trust floors and filters;
* semantic search (same vectors) gives the same hits, scores included; exact
  and hybrid search find the same items (their order and scores may differ:
  the two stores' ranking functions share a contract, not their numbers,
  tests/contract/test_ranking.py);
* the durable run's results are byte for byte the same, and so are its
  replays;
* the two ledgers hold the same entries (kind, body, key, time, redactions,
  payloads) in the same order, and each verifies.

Skipped when no PostgreSQL test server is there (``MEMSEAL_TEST_POSTGRES``).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clock import Clock
from stores import POSTGRES, drop_schemas, fresh_url

import memseal
from memseal.engine import (
    FACETS,
    Conversation,
    Document,
    Engine,
    HashingEmbedder,
    Learning,
    Meta,
    Reach,
    Source,
    Turn,
)
from memseal.tools import ToolScope

pytestmark = pytest.mark.skipif(
    not POSTGRES, reason="no PostgreSQL test server (MEMSEAL_TEST_POSTGRES; .ci/postgres.sh)"
)

WRITER = "team:acme/agent:writer"
READER = "team:acme/agent:reader"
ENCODER = msgspec.json.Encoder(order="deterministic")


@pytest.fixture
async def url() -> AsyncIterator[str]:
    made, schema = fresh_url("eq")
    try:
        yield made
    finally:
        await drop_schemas([schema])


def _open(folder: Path, store: str | None) -> Any:
    return memseal.open(
        folder,
        store=store,
        clock=Clock(),
        embedder=HashingEmbedder(),
        checkpoint_interval=None,
    )


async def _history(memory: memseal.Memory) -> list[bytes]:
    """The writes, the same on each store; returns the durable run's results and their
    replays, encoded."""
    engine = memory.engine
    ids: dict[str, str] = {}

    async def learn(name: str, text: str, namespace: str = WRITER, **extra: Any) -> None:
        ids[name] = (await engine.store(Learning(text=text), namespace=namespace, **extra)).id

    await learn(
        "dark",
        "Dana prefers dark mode in every editor",
        tags=["ui", "preferences"],
        meta=Meta(source=Source(kind="user", id="dana"), workspace="w1", repo="acme/web"),
    )
    await learn("deploy", "Deploys go out on Tuesdays after the standup", namespace="team:acme")
    await learn("cafe", "The team meets at the café on Fridays", namespace="team:acme")
    await learn("rival", "Rival deploy plans leaked", namespace="team:acme-corp")
    await learn("reader", "The reader agent keeps its own notes", namespace=READER)
    ids["runbook"] = (
        await engine.store(
            Document(title="Deploy runbook", text="Roll back with the previous image tag."),
            namespace="team:acme",
            tags=["ops"],
            meta=Meta(file_path="docs/runbook.md", language="en"),
            observed_at="2026-11-01T08:00:00Z",
        )
    ).id
    ids["talk"] = (
        await engine.store(
            Conversation(
                turns=(
                    Turn(role="user", text="when is the deploy freeze?"),
                    Turn(role="assistant", text="it starts December 20"),
                )
            ),
            namespace=WRITER,
            meta=Meta(thread_id="t-7", agent_id="writer-bot"),
        )
    ).id
    ids["lesson"] = (
        await engine.store(
            Learning(text="Retry the flaky test once, then file it", kind="lesson"),
            namespace=WRITER,
            tags=["ci"],
            sources=(ids["deploy"],),
        )
    ).id
    for n in range(6):
        await learn(f"tmp{n}", f"temporary scratch note {n}", tags=["tmp"])

    await engine.promote(ids["dark"], actor="reviewer:ana", reason="asked Dana")
    await engine.mark_stale(ids["deploy"], actor="host", reason="schedule changed")
    await engine.reject(ids["rival"], actor="host", reason="not ours")
    await engine.promote(ids["runbook"], actor="reviewer:ana", reason="checked")

    await engine.forget(ids=[ids["tmp0"], ids["tmp1"], "0" * 32])
    await engine.forget(filter={"tags_any": ["tmp"]}, reach=Reach.subtree("team:acme"))
    await learn("tmp0", "temporary scratch note 0", tags=["tmp"])  # stored anew after its forget
    await engine.forget(ids=[ids["talk"]])

    # A durable run through the tools, and its replay.
    scope = ToolScope.placed_at(WRITER, floor="stale")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_store", {"learning": {"text": "the deploy key lives in vault"}, "tags": ["ops"]}),
        ("memory_list", {"limit": 50}),
        ("memory_fetch", {"query": "deploy key", "mode": "semantic"}),
        ("memory_get", {"ids": [ids["dark"], ids["rival"], ids["reader"], "nope"]}),
        ("memory_explore", {"facet": "tag"}),
        ("memory_forget", {"ids": [ids["tmp0"]]}),
        ("memory_list", {"limit": 50, "min_trust": "stale"}),
    ]
    async with memory.run("run-eq", scope) as run:
        results = [ENCODER.encode(await run.call(name, args)) for name, args in calls]
    # Replayed from the memos: the calls whose results showed tmp0 come back with their
    # texts as forgotten markers (a tool call's payload is erased whole, docs/replay.md).
    async with memory.run("run-eq", scope, mode="strict") as run:
        replayed = [ENCODER.encode(await run.call(name, args)) for name, args in calls]
    assert replayed[0] == results[0] and replayed[-1] == results[-1]
    return results + replayed


async def _reads(engine: Engine) -> dict[str, Any]:
    """Every read the engine serves, as plain data (exact and hybrid hits as sets of ids)."""
    seen: dict[str, Any] = {}
    reaches = {
        "all": None,
        "writer": Reach.of(WRITER),
        "acme": Reach.subtree("team:acme"),
        "exact": Reach.exact("team:acme"),
    }
    everything = (await engine.list(limit=50, min_trust="stale")).items
    ids = [item.id for item in everything]
    for name, reach in reaches.items():
        for floor in ("stale", "unverified", "verified"):
            key = f"{name}/{floor}"
            page = await engine.list(reach=reach, min_trust=floor, limit=50)
            seen[f"list {key}"] = msgspec.to_builtins(page)
            got = await engine.get([*ids, "0" * 32], reach=reach, min_trust=floor)
            seen[f"get {key}"] = msgspec.to_builtins(got)
        for facet in FACETS:
            explored = await engine.explore(facet, reach=reach, min_trust="stale")
            seen[f"explore {name} {facet}"] = msgspec.to_builtins(explored)
        for query in ("deploy", "dark mode editor", "cafe", "the", "vault key"):
            semantic = await engine.fetch(query, mode="semantic", reach=reach, limit=50)
            seen[f"semantic {name} {query}"] = msgspec.to_builtins(semantic)
            for mode in ("exact", "hybrid"):
                hits = (await engine.fetch(query, mode=mode, reach=reach, limit=50)).hits
                seen[f"{mode} {name} {query}"] = sorted(h.item.id for h in hits)
    filters: list[dict[str, object]] = [
        {"kinds": ["lesson"]},
        {"tags_any": ["ops", "ui"]},
        {"workspace": "w1"},
    ]
    for raw in filters:
        page = await engine.list(filter=raw, limit=50)
        seen[f"list filter {raw}"] = msgspec.to_builtins(page)
    return seen


def _unsalted(value: Any) -> Any:
    """A signed body without what random salts decide: the salted hashes of texts
    (``{"$t": ...}``) and of a result."""
    if isinstance(value, dict):
        if set(value) == {"$t"}:
            return "$t"
        return {k: _unsalted(v) for k, v in value.items() if k != "result_hash"}
    if isinstance(value, list):
        return [_unsalted(v) for v in value]
    return value


async def _entries(memory: memseal.Memory) -> list[tuple[Any, ...]]:
    """The ledger's entries less what is salted (payload hashes, so the chain), with the
    payloads a forget left."""
    found: list[tuple[Any, ...]] = []
    async for record in memory.ledger.scan():
        entry = record.entry()
        body = _unsalted(msgspec.json.decode(bytes(entry.body)))
        found.append((entry.seq, entry.at, entry.kind, entry.key, entry.redacts, body))
        payload = None if record.payload is None else msgspec.json.decode(record.payload)
        if isinstance(payload, dict) and "texts" in payload:
            # A tool call's texts, each under its salted hash with its salt: the texts alone.
            payload["texts"] = sorted(text for _, text in payload["texts"].values())
        found.append((entry.seq, payload))
    return found


async def test_the_same_history_gives_the_same_memory_on_both_stores(
    tmp_path: Path, url: str
) -> None:
    sqlite_folder, postgres_folder = tmp_path / "sqlite", tmp_path / "postgres"
    async with _open(sqlite_folder, None):
        pass  # keys first: the PostgreSQL folder gets a copy of them
    postgres_folder.mkdir(mode=0o700)
    shutil.copytree(sqlite_folder / "keys", postgres_folder / "keys")

    outcome: dict[str, dict[str, Any]] = {}
    for name, folder, store in (
        ("sqlite", sqlite_folder, None),
        ("postgresql", postgres_folder, url),
    ):
        async with _open(folder, store) as memory:
            assert memory.location.startswith("postgresql://") == (store is not None)
            run = await _history(memory)
            engine = memory.engine
            incremental = await engine.state_hash()
            assert await engine.recompute_state_hash() == incremental
            reads = await _reads(engine)
            report = await engine.rebuild()
            assert report.matches and report.state_hash == incremental
            assert await _reads(engine) == reads  # the rebuilt projection reads the same
            await memory.ledger.verify(trust=memory.trust_root)
            outcome[name] = {
                "state": incremental,
                "rebuilt": (report.items, report.events, report.entries, report.state_hash),
                "reads": reads,
                "run": run,
                "entries": await _entries(memory),
                "vkey": memory.vkey,
            }

    sqlite, postgres = outcome["sqlite"], outcome["postgresql"]
    assert postgres["vkey"] == sqlite["vkey"]
    assert postgres["entries"] == sqlite["entries"]
    assert postgres["state"] == sqlite["state"]
    assert postgres["rebuilt"] == sqlite["rebuilt"]
    assert postgres["run"] == sqlite["run"]
    differing = sorted(k for k in sqlite["reads"] if sqlite["reads"][k] != postgres["reads"][k])
    assert differing == [], differing
    assert postgres["reads"] == sqlite["reads"]
    # ...and they are reads of something: what the history left.
    everything = sqlite["reads"]["list all/stale"]["items"]
    assert len(everything) == 7 and sqlite["rebuilt"][0] == 8  # and one rejected
    assert any(item["verdicts"] for item in everything)
