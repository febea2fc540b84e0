"""Forget that forgets: signed, verifiable, unqueryable, and gone from the bytes on disk.

Text is stored through every path (learning text and evidence, document title and text,
conversation turns, tags, each metadata field, a trust change's reason, and a tool-call
payload written by a layer above that mentions the item). After the forget and its scrub,
none of it appears in the raw bytes of any file in the data folder (database, WAL, shm),
`verify` still passes, and no query returns the items. A scrub that readers hold up is
retried; one a crash interrupted resumes at the next open.

The forgets run on PostgreSQL too (when the test server is there). There the check is of
every row of every table in the store's schema, as the server returns them: PostgreSQL
keeps a dead row's bytes in its files and WAL until the space is reused and the segments
recycled (docs/scaling.md), so the check of the bytes on disk is SQLite's alone, and so
are the scrub's reader and crash cases (a WAL checkpoint, an FTS merge).
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memseal.cli.engine import open_engine
from memseal.engine import (
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
from memseal.engine.events import MemoryForgotten, decode_event, decode_forget_payload
from memseal.ledger.errors import InvalidRequest
from memseal.ledger.location import parse_database_url
from memseal.memory import DATABASE

PLACE = "team:acme/agent:writer"


def marker(name: str) -> str:
    # Letters only, no common stems: FTS keeps lowercased Porter stems, so the check also
    # looks for the first eight letters alone.
    return f"qzx{name}vkj"


MARKERS = {
    "learning": marker("lrntext"),
    "evidence": marker("evdnc"),
    "doctitle": marker("dctitle"),
    "doctext": marker("dcbody"),
    "turnuser": marker("usrturn"),
    "turnbot": marker("bototurn"),
    "tag": marker("tagone"),
    "source": marker("srcid"),
    "file": marker("filepth"),
    "url": marker("urlpart"),
    "thread": marker("thrdid"),
    "agent": marker("agntid"),
    "workspace": marker("wrkspc"),
    "folder": marker("fldr"),
    "repo": marker("rep"),
    "language": marker("lang"),
    "tool": marker("tlcall"),
    "reason": marker("rsn"),
    "toolcall": marker("tlpayload"),
}
KEEP = marker("keepme")


def _seen(found: dict[str, list[str]], where: str, data: bytes) -> None:
    for name, text in MARKERS.items():
        if text.encode() in data or text[:8].encode() in data:
            found.setdefault(name, []).append(where)


def _table_bytes(store: str) -> dict[str, bytes]:
    """Every value of every row of every table in the store's schema, by table."""
    import psycopg
    from psycopg import sql

    url = parse_database_url(store)
    assert url.schema is not None  # the test stores' URLs name their schema
    tables: dict[str, bytes] = {}
    with psycopg.connect(url.dsn, autocommit=True) as conn:
        names = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (url.schema,),
        ).fetchall()
        for (table,) in sorted(names):
            rows = conn.execute(
                sql.SQL("SELECT * FROM {}").format(sql.Identifier(url.schema, table))
            ).fetchall()
            values: list[Any] = [value for row in rows for value in row]
            tables[table] = b"\n".join(
                bytes(v) if isinstance(v, bytes | memoryview) else str(v).encode() for v in values
            ).lower()
    return tables


def leaks(folder: Path, store: str | None = None) -> dict[str, list[str]]:
    """Which markers (or their first eight letters) appear in which files of ``folder``,
    and in which tables of the PostgreSQL ``store``'s schema when one is given."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        _seen(found, path.name, path.read_bytes().lower())
    if store is not None:
        for table, data in _table_bytes(store).items():
            _seen(found, table, data)
    return found


async def store_everything(engine: Engine) -> list[str]:
    m = MARKERS
    learning = await engine.store(
        Learning(text=f"The code word is {m['learning']}", evidence=f"seen in {m['evidence']}"),
        namespace=PLACE,
        tags=[m["tag"]],
        meta=Meta(
            source=Source(kind="agent", id=m["source"]),
            file_path=f"src/{m['file']}.py",
            url=f"https://example.com/{m['url']}",
            thread_id=m["thread"],
            agent_id=m["agent"],
            workspace=m["workspace"],
            folder=m["folder"],
            repo=f"acme/{m['repo']}",
            language=m["language"],
            tool_call=m["tool"],
        ),
    )
    document = await engine.store(
        Document(title=f"Notes {m['doctitle']}", text=f"The body says {m['doctext']} twice."),
        namespace=PLACE,
    )
    conversation = await engine.store(
        Conversation(
            turns=(
                Turn(role="user", text=f"remember {m['turnuser']}"),
                Turn(role="assistant", text=f"noted {m['turnbot']}"),
            )
        ),
        namespace="team:acme",
    )
    await engine.promote(learning.id, actor="reviewer", reason=f"because {m['reason']}")
    # A layer above (the replay recorder) writes a payload carrying the item's text.
    await engine.ledger.append(
        "memory_tool_call",
        {"tool": "memory_fetch"},
        {"result": f"hit: {m['toolcall']}"},
        mentions=[learning.id],
    )
    await engine.store(Learning(text=f"unrelated {KEEP}"), namespace=PLACE)
    return [learning.id, document.id, conversation.id]


async def assert_gone(engine: Engine, ids: list[str]) -> None:
    assert (await engine.get(ids)).missing == tuple(ids)
    for name, text in MARKERS.items():
        for mode in engine.modes:
            hits = (await engine.fetch(text, mode=mode)).hits
            assert all(text not in h.item.text for h in hits), (name, mode)
    assert {i.text for i in (await engine.list()).items} == {f"unrelated {KEEP}"}
    assert (await engine.explore("tag")).buckets == ()
    await engine.ledger.verify()


async def test_forget_by_ids_erases_every_path_from_disk(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    async with open_engine(
        folder, create=True, embedder=HashingEmbedder(), store=store_url
    ) as engine:
        ids = await store_everything(engine)
        assert set(leaks(folder, store_url)) == set(MARKERS)  # the check can see them
        size = await engine.ledger.size()
        result = await engine.forget(ids=[*ids, "0" * 32])
        assert result.forgotten == tuple(ids) and result.skipped == ("0" * 32,)
        assert result.scrubbed and len(result.seqs) == 1
        assert result.seqs[0] == size
        forgotten = await engine.ledger.read(result.seqs[0])
        assert forgotten.entry().kind == "memory_forgotten"
        # The stores, the trust change and the tool call: every payload mentioning the items.
        assert len(result.redacted) == 5
        assert await engine.ledger.mentioning(ids[0]) == []
        assert leaks(folder, store_url) == {}
        await assert_gone(engine, ids)
        assert await engine.recompute_state_hash() == await engine.state_hash()
        assert (await engine.rebuild()).matches
        await engine.ledger.verify()
    assert leaks(folder, store_url) == {}
    # `memseal verify` (a separate process, the auditor's view) passes too.
    vkey = (folder / "keys" / "ledger.vkey").read_text().strip()
    audited = store_url or str(folder)
    done = await asyncio.to_thread(
        subprocess.run,
        [str(Path(sys.executable).parent / "memseal"), "verify", audited, "--trust", vkey],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


async def test_forget_by_filter_reaches_only_what_the_filter_and_reach_name(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    async with open_engine(folder, create=True, store=store_url) as engine:
        ids = await store_everything(engine)
        outside = await engine.store(
            Learning(text="elsewhere"), namespace="team:other", tags=[MARKERS["tag"]]
        )
        tagged = await engine.forget(
            filter={"tags_any": [MARKERS["tag"]]}, reach=Reach.subtree("team:acme")
        )
        assert tagged.forgotten == (ids[0],)  # not the item outside the reach
        shaped = await engine.forget(
            filter={"kinds": ["document", "conversation"]}, reach=Reach.subtree("team:acme")
        )
        assert shaped.forgotten == (ids[1], ids[2]) and shaped.skipped == ()
        remaining = {i.text for i in (await engine.list(limit=50)).items}
        assert remaining == {"elsewhere", f"unrelated {KEEP}"}
        await engine.forget(ids=[outside.id])
        assert leaks(folder, store_url) == {}
        await engine.ledger.verify()


async def test_a_forget_with_a_reason_signs_it_and_an_old_forget_without_one_still_verifies(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    async with open_engine(folder, create=True, store=store_url) as engine:
        old = await engine.store(Learning(text="forgotten the old way"), namespace=PLACE)
        new = await engine.store(Learning(text="forgotten with a reason"), namespace=PLACE)
        # A forget as every ledger before the reason has one: no payload at all.
        before = await engine.forget(ids=[old.id])
        assert (await engine.ledger.read(before.seqs[0])).payload is None
        for bad, name in ((" ", "reason"), ("x" * 2001, "reason")):
            with pytest.raises(InvalidRequest, match=f"`{name}`"):
                await engine.forget(ids=[new.id], actor="tok-1 ops", reason=bad)
        with pytest.raises(InvalidRequest, match="`actor`"):
            await engine.forget(ids=[new.id], actor=7, reason="ok")  # type: ignore[arg-type]
        assert new.id in {i.id for i in (await engine.list(limit=10)).items}
        done = await engine.forget(ids=[new.id], actor="tok-1 ops", reason="ticket 12")
        record = await engine.ledger.read(done.seqs[0])
        assert record.payload is not None
        why = decode_forget_payload(bytes(record.payload))
        assert (why.actor, why.reason) == ("tok-1 ops", "ticket 12")
        assert decode_event("memory_forgotten", bytes(record.entry().body)) == MemoryForgotten(
            items=(new.id,)
        )
        # Both shapes side by side: the log verifies and the projections rebuild the same.
        await engine.ledger.verify()
        assert (await engine.rebuild()).matches
        assert await engine.recompute_state_hash() == await engine.state_hash()


async def test_a_scrub_held_up_by_a_reader_is_retried(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    async with open_engine(folder, create=True) as engine:
        ids = await store_everything(engine)
        reader = sqlite3.connect(folder / DATABASE)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM entries").fetchone()  # holds an old snapshot
        result = await engine.forget(ids=ids)
        assert not result.scrubbed
        assert await engine._store.rows("SELECT seq FROM engine_scrub") == [(result.seqs[0],)]
        reader.rollback()
        reader.close()
        # The background retry finishes it (or an explicit scrub does, whichever is first).
        for _ in range(100):
            if not await engine._store.rows("SELECT seq FROM engine_scrub"):
                break
            await asyncio.sleep(0.05)
        assert await engine.scrub()
        assert leaks(folder) == {}
        await assert_gone(engine, ids)


_CRASH = """
import asyncio, os, sys
from memseal.cli.engine import open_engine

async def main():
    async with open_engine(sys.argv[1]) as engine:
        ids = sys.argv[2].split(",")
        await engine.forget(ids=ids, scrub=False)
        os._exit(0)  # a crash after the forget committed, before its scrub

asyncio.run(main())
"""


@pytest.mark.slow
async def test_an_interrupted_scrub_resumes_at_the_next_open(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    async with open_engine(folder, create=True) as engine:
        ids = await store_everything(engine)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _CRASH, str(folder), ",".join(ids)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert leaks(folder) != {}  # the FTS index and the WAL still hold the words
    async with open_engine(folder) as engine:
        assert leaks(folder) == {}
        await assert_gone(engine, ids)
