"""Reads recorded before ``memseal migrate`` still prove byte for byte on PostgreSQL.

A ledger copied from SQLite to PostgreSQL holds reads SQLite's BM25 ranked and,
after the copy, reads PostgreSQL's ``ts_rank`` ranked. A proof's ``ranked_by``
used to be the store's dialect when the proof was made, so every proof of an
exact fetch made before the move re-ranked with ``ts_rank`` and failed, naming
the hit that moved; a bundle's reads section even signed the wrong ranking into
its manifest. The copy now marks the size it copied (``sqlite_ranked_below``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from close_texts import READS, SCOPE, STORES, record_close
from stores import POSTGRES, drop_schemas, fresh_url

import memseal
from memseal import InvalidRequest
from memseal.cli.pgcopy import migrate
from memseal.engine import SQLITE_RANKED_BELOW, HashingEmbedder
from memseal.ledger.errors import StorageError
from memseal.memory import STORE_ENV
from memseal.replay.evidence.bundle import encode_bundle, export_bundle, verify_bundle
from memseal.replay.evidence.read_proof import (
    encode_read_proof,
    prove_read_from_bundle,
    verify_read,
)
from memseal.replay.regress.regress import regress

pytestmark = pytest.mark.skipif(
    not POSTGRES,
    reason='MEMSEAL_TEST_POSTGRES is unset: no PostgreSQL server (eval "$(.ci/postgres.sh)")',
)


@pytest.fixture(autouse=True)
def _no_store_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)


@pytest.fixture
def target() -> Iterator[tuple[str, str]]:
    url, schema = fresh_url("moved")
    try:
        yield url, schema
    finally:
        asyncio.run(drop_schemas([schema]))


async def _scenario(folder: Path, url: str) -> None:
    async with memseal.open(folder, embedder=HashingEmbedder(), checkpoint_interval=None) as m:
        async with m.run("before", SCOPE) as run:
            asked, before = await record_close(run)
        async with m.run("across", SCOPE) as run:
            await run.call("memory_fetch", {"query": "alpha beta", "mode": "exact"})
        vkey = m.vkey
    copied = await migrate(folder, url)
    async with memseal.open(
        folder, store=url, embedder=HashingEmbedder(), checkpoint_interval=None
    ) as m:
        marked = await m.ledger.store.rows(
            "SELECT value FROM meta WHERE key = ?", (SQLITE_RANKED_BELOW,)
        )
        assert marked == [(str(copied.size),)]
        async with m.run("after", SCOPE) as run:
            _, after = await record_close(run)
        async with m.run("across", SCOPE) as run:  # resumed: step 0 is its memo
            await run.call("memory_fetch", {"query": "alpha beta", "mode": "exact"})
            await run.call("memory_fetch", {"query": "gamma ledger", "mode": "exact"})
        for run_id, seen, ranker in (("before", before, "sqlite"), ("after", after, "postgresql")):
            for k in range(READS):
                proof = await m.prove_read(run_id, STORES + k)
                verified = await verify_read(proof, vkey)
                assert verified.result == seen[k]
                assert (verified.how, verified.ranked_by) == ("byte for byte", ranker), (
                    run_id,
                    k,
                    verified.why,
                )
        # The two rankings really differ on these texts: otherwise the test proves nothing.
        assert [h["id"] for r in before for h in r["hits"]] != [
            h["id"] for r in after for h in r["hits"]
        ] or [h["score"] for r in before for h in r["hits"]] != [
            h["score"] for r in after for h in r["hits"]
        ]

        # A bundle of a run recorded before the move signs SQLite's ranking into its manifest.
        keys = await m.key_history()
        bundle = encode_bundle(await export_bundle(m.ledger, keys, "before", with_read_proofs=True))
        checked = verify_bundle(bundle, vkey)
        assert checked.manifest.reads is not None
        assert checked.manifest.reads.ranked_by == "sqlite"
        assert checked.manifest.ranked_by is None  # so replay ranks with BM25, as it ran
        replayed = await regress(checked, embedder=HashingEmbedder())
        assert not replayed.changed, replayed.text()
        for k in range(READS):
            from_bundle = encode_read_proof(prove_read_from_bundle(checked, STORES + k))
            verified = await verify_read(from_bundle, vkey)
            assert (verified.how, verified.ranked_by) == ("byte for byte", "sqlite"), verified.why
            assert verified.result == before[k]

        # A run whose reads straddle the move cannot name one ranking: refused, not misnamed.
        with pytest.raises(InvalidRequest, match="move from SQLite to PostgreSQL"):
            await export_bundle(m.ledger, keys, "across", with_read_proofs=True)
        for step in (0, 1):
            proof = await m.prove_read("across", step)
            verified = await verify_read(proof, vkey)
            assert verified.how == "byte for byte", verified.why
            assert verified.ranked_by == ("sqlite" if step == 0 else "postgresql")

        # A view as of a step before the move ranks as SQLite did: the agent's own results.
        for k in range(READS):
            view = (await m.as_of(run="before", step=STORES + k)).tools(SCOPE)
            past = await view.call("memory_fetch", asked[k])
            assert [(h["id"], h["score"]) for h in past["hits"]] == [
                (h["id"], h["score"]) for h in before[k]["hits"]
            ]


def test_reads_before_and_after_a_migration_prove_with_their_own_ranking(
    tmp_path: Path, target: tuple[str, str]
) -> None:
    asyncio.run(_scenario(tmp_path / "data", target[0]))


def test_a_mark_written_by_hand_in_another_form_is_refused_naming_it(
    tmp_path: Path, target: tuple[str, str]
) -> None:
    import psycopg
    from psycopg import sql

    url, schema = target
    folder = tmp_path / "data"
    asyncio.run(_scenario(folder, url))
    assert POSTGRES is not None
    # The form the migration prints its count in ("copied: 1,031 entries"), a count no
    # copy makes, one past the log (a wrong view, not just a failed proof), and digits
    # past what int() reads (a bare int() raised ValueError).
    for value, named in [
        ("1,031", "'1,031', no count"),
        ("0", "'0', no count"),
        ("100000", r"'100000', more than the \d+ entries the log holds"),
        ("9" * 5000, "'9999.*, no count"),
    ]:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(
                sql.SQL("UPDATE {}.meta SET value = %s WHERE key = %s").format(
                    sql.Identifier(schema)
                ),
                (value, SQLITE_RANKED_BELOW),
            )

        async def prove(named: str = named) -> None:
            async with memseal.open(folder, store=url, embedder=None) as m:
                with pytest.raises(StorageError, match=f"sqlite_ranked_below.*{named}"):
                    await m.prove_read("before", STORES)
                with pytest.raises(StorageError, match="sqlite_ranked_below"):
                    await export_bundle(m.ledger, await m.key_history(), "before")
                view = (await m.as_of(size=STORES)).tools(SCOPE)
                with pytest.raises(StorageError, match="sqlite_ranked_below"):
                    await view.call("memory_fetch", {"query": "ledger", "mode": "exact"})

        asyncio.run(prove())
