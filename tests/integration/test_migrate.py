"""``memseal migrate``: a SQLite ledger copied to PostgreSQL agrees with its source.

The source is a data folder with real content: memories stored through the engine and
through the tools, recorded runs, a one-shot call, a trust change, a forget that redacts
payloads (of the item and of a recorded call that showed it), checkpoints and a key
rotation. Each test migrates it into a schema of its own in the database
``MEMSEAL_TEST_POSTGRES`` names (``eval "$(.ci/postgres.sh)"``).
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec
import pytest
from stores import POSTGRES, fresh_url

import memseal
from memseal import ToolScope
from memseal.cli import main
from memseal.engine import HashingEmbedder, Learning
from memseal.ledger.errors import StorageError
from memseal.memory import STORE_ENV, open_audit
from memseal.replay.runs.memo import hits_of

needs_postgres = pytest.mark.skipif(
    not POSTGRES,
    reason='MEMSEAL_TEST_POSTGRES is unset: no PostgreSQL server (eval "$(.ci/postgres.sh)")',
)

PLACE = "team:acme/agent:writer"
RUN_A: list[tuple[str, dict[str, Any]]] = [
    ("memory_store", {"learning": {"text": "Dana prefers dark mode in every editor"}}),
    ("memory_store", {"learning": {"text": "The deploy freeze starts on Fridays at noon"}}),
    ("memory_fetch", {"query": "dark mode"}),
    ("memory_fetch", {"query": "deploy freeze", "mode": "exact"}),
    ("memory_list", {}),
]


class Source(msgspec.Struct, frozen=True, kw_only=True):
    folder: Path
    trust: str
    size: int
    root: bytes
    state_hash: str
    results: list[Any]
    vectors: int


async def _fill(folder: Path) -> Source:
    async with memseal.open(
        folder, embedder=HashingEmbedder(), checkpoint_every=8, checkpoint_interval=None
    ) as memory:
        scope = ToolScope.placed_at(PLACE)
        results = []
        async with memory.run("run-a", scope) as run:
            for name, arguments in RUN_A:
                results.append(await run.call(name, arguments))
        # Resumed once: five memo hits, in the unsigned memo_hits table (no entry).
        async with memory.run("run-a", scope) as run:
            for name, arguments in RUN_A:
                await run.call(name, arguments)
        await memory.call(
            "memory_store", {"learning": {"text": "One-shot: tea at four"}}, scope=scope
        )
        kept = await memory.engine.store(
            Learning(text="The staging database moved to port 6543"), namespace=PLACE
        )
        await memory.engine.promote(kept.id, actor="reviewer", reason="checked the runbook")
        secret = await memory.engine.store(
            Learning(text="The door code is zebracrossing"), namespace=PLACE, tags=["home"]
        )
        async with memory.run("run-b", scope) as run:
            shown = await run.call("memory_fetch", {"query": "door code", "mode": "exact"})
            assert "zebracrossing" in shown["hits"][0]["text"]
            await run.call("memory_forget", {"ids": [secret.id]})
        await memory.ledger.checkpoint()
        await memory.rotate_key()
        async with memory.run("run-c", scope) as run:
            await run.call("memory_store", {"learning": {"text": "Signed by the second key"}})
        vectors = await memory.ledger.store.rows("SELECT count(*) FROM engine_vectors")
        return Source(
            folder=folder,
            trust=memory.trust_root,
            size=await memory.ledger.size(),
            root=await memory.ledger.root(),
            state_hash=await memory.engine.state_hash(),
            results=results,
            vectors=int(vectors[0][0]),
        )


@pytest.fixture(autouse=True)
def _no_store_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Source:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(STORE_ENV, raising=False)
        made = asyncio.run(_fill(tmp_path_factory.mktemp("migrate") / "data"))
    assert made.vectors > 0
    return made


@pytest.fixture
def source(filled: Source, tmp_path: Path) -> Source:
    """A copy of the filled folder for this test: a migrate marks the folder as moved."""
    folder = tmp_path / "source"
    shutil.copytree(filled.folder, folder)
    return msgspec.structs.replace(filled, folder=folder)


def _with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def _drop(schema: str) -> None:
    import psycopg
    from psycopg import sql

    assert POSTGRES
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute("SET client_min_messages TO warning")
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def target() -> Iterator[str]:
    """A PostgreSQL URL naming a schema of this test's own (made by the migrate, then dropped)."""
    url, schema = fresh_url("migrate")
    try:
        yield url
    finally:
        _drop(schema)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _password(url: str) -> str:
    password = urlsplit(url).password
    assert password, "the test server's URL carries a password"
    return password


def _table_state(url: str) -> dict[str, Any]:
    """Every row count of the target's schema, and its meta rows (to see that nothing moved)."""
    import psycopg
    from psycopg import sql

    from memseal.ledger.location import parse_database_url

    where = parse_database_url(url)
    assert where.schema is not None
    with psycopg.connect(where.dsn, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
                (where.schema,),
            )
        ]
        state: dict[str, Any] = {}
        for table in tables:
            name = sql.Identifier(where.schema, table)
            count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name)).fetchone()
            state[table] = None if count is None else count[0]
        for table in ("meta", "engine_meta"):
            if table in tables:
                name = sql.Identifier(where.schema, table)
                state[f"{table} rows"] = conn.execute(
                    sql.SQL("SELECT key, value FROM {} ORDER BY key").format(name)
                ).fetchall()
        return state


@needs_postgres
def test_migrate_copies_rebuilds_and_agrees(
    source: Source, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)
    assert code == 0, err
    assert _password(target) not in out + err
    assert "***" in out
    assert f"copied: {source.size:,} entries" in out
    assert f"{source.vectors:,} cached vectors" in out
    assert "rebuilt: " in out
    assert f"size:       {source.size:,} entries (equal)" in out
    assert f"root:       {source.root.hex()} (equal)" in out
    assert f"state hash: {source.state_hash} (equal)" in out
    assert f"verified: ok: {source.size} entries verified" in out
    assert "DIFFERENT" not in out

    async def check() -> None:
        async with memseal.open(
            source.folder, store=target, embedder=None, checkpoint_interval=None
        ) as memory:
            assert await memory.ledger.size() == source.size
            assert await memory.ledger.root() == source.root
            assert await memory.engine.state_hash() == source.state_hash
            # The rebuilt projection is the one kept incrementally, recomputed from its rows.
            assert await memory.engine.recompute_state_hash() == source.state_hash
            rows = await memory.ledger.store.rows("SELECT count(*) FROM engine_vectors")
            assert rows[0][0] == source.vectors  # the cache came along: nothing re-embedded
            summary = await memory.ledger.verify(trust=source.trust)
            assert summary.size == source.size and len(summary.keys) == 2
            assert summary.redacted >= 2  # the item's own entry and the call that showed it

    asyncio.run(check())


@needs_postgres
def test_a_resumed_run_on_the_target_returns_its_memoised_results(
    source: Source, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)
    assert code == 0, err

    async def resume() -> None:
        async with memseal.open(
            source.folder, store=target, embedder=HashingEmbedder(), checkpoint_interval=None
        ) as memory:
            before = await memory.ledger.size()
            # The source's memo hits came along (an unsigned count, beside the memos).
            copied, last_hit = await hits_of(memory.ledger.store, "run-a")
            assert copied == 5 and last_hit is not None
            async with memory.run("run-a", ToolScope.placed_at(PLACE), mode="resume") as run:
                again = [await run.call(name, arguments) for name, arguments in RUN_A]
            assert again == source.results
            assert await memory.ledger.size() == before  # every call served from its memo
            assert (await hits_of(memory.ledger.store, "run-a"))[0] == 10
            # And the target takes new writes, signed by the folder's current key.
            async with memory.run("run-d", ToolScope.placed_at(PLACE)) as run:
                await run.call("memory_store", {"learning": {"text": "Written after the move"}})
                hits = await run.call("memory_fetch", {"query": "after the move"})
            assert hits["hits"][0]["text"] == "Written after the move"
            await memory.ledger.verify(trust=source.trust)

    asyncio.run(resume())


@needs_postgres
def test_verify_gives_the_same_summary_on_both_stores(
    source: Source, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)
    assert code == 0, err
    code, on_sqlite, err = _cli(capsys, "verify", str(source.folder), "--trust", source.trust)
    assert code == 0, err
    code, on_postgres, err = _cli(capsys, "verify", target, "--trust", source.trust)
    assert code == 0, err
    assert on_postgres == on_sqlite
    assert on_postgres.startswith(f"ok: {source.size} entries verified")
    assert _password(target) not in err


@needs_postgres
def test_verify_of_a_store_url_fails_with_1_on_a_tampered_entry(
    source: Source, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    from memseal.ledger.location import parse_database_url

    assert _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)[0] == 0
    where = parse_database_url(target)
    with psycopg.connect(where.dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {where.schema}.entries SET sig = %s WHERE seq = 2", (bytes(64),))
    code, _, err = _cli(capsys, "verify", target, "--trust", source.trust)
    assert code == 1
    assert "seq 2: signature" in err


@needs_postgres
def test_migrate_refuses_a_target_that_holds_entries_and_writes_nothing(
    source: Source, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)[0] == 0
    before = _table_state(target)
    code, out, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)
    assert code == 2
    assert f"already holds a ledger of {source.size:,} entries" in err
    assert "nothing was written" in err
    assert "Traceback" not in err
    assert _password(target) not in out + err
    assert _table_state(target) == before


@needs_postgres
def test_migrate_fills_an_empty_ledger_made_by_opening_the_target(
    source: Source, target: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A target opened once (tables, origin, an empty projection) is still empty: filled,
    and its projection is rebuilt rather than taken for current."""

    async def touch() -> None:
        async with memseal.open(tmp_path / "other", store=target, embedder=None):
            pass

    asyncio.run(touch())
    code, out, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)
    assert code == 0, err
    assert f"state hash: {source.state_hash} (equal)" in out


@needs_postgres
def test_migrate_stops_a_live_writer_and_copies_the_whole_log(
    source: Source, target: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A process still appending to the folder when migrate starts is stopped by it (its
    writes fail, naming the store) rather than go on signing a log nobody reads."""
    folder = tmp_path / "live"
    shutil.copytree(source.folder, folder)
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(folder), str(stop)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while _sqlite_size(folder) < source.size + 20:
            assert writer.poll() is None, writer.stderr.read() if writer.stderr else ""
            assert time.monotonic() < deadline, "the writer appended nothing"
            time.sleep(0.05)
        code, out, err = _cli(capsys, "migrate", "--from", str(folder), "--to", target)
    finally:
        stop.touch()
        _, writer_err = writer.communicate(timeout=60)
    assert code == 0, err
    assert "DIFFERENT" not in out and "grew" not in out
    assert writer.returncode != 0 and "moved to" in writer_err, writer_err

    async def check() -> None:
        async with memseal.open(
            folder, store=target, embedder=None, checkpoint_interval=None
        ) as there:
            copied = await there.ledger.size()
            root = await there.ledger.root()
            await there.ledger.verify(trust=source.trust)
        # The folder's file is frozen at what was copied; opening it for writing is refused.
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv(STORE_ENV, raising=False)
            with pytest.raises(StorageError, match="moved to"):
                await memseal.open(folder, embedder=None)
            async with open_audit(folder) as here:
                assert await here.size() == copied > source.size
                assert await here.root() == root

    asyncio.run(check())


_WRITER = """
import asyncio, sys
from pathlib import Path
import memseal

async def main(folder, stop):
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        n = 0
        while not stop.exists():
            await asyncio.gather(*(
                memory.ledger.append("note", {"n": n + i}, {"text": f"live {n + i}"})
                for i in range(5)
            ))
            n += 5
        # A few more after the stop, so the source has surely grown past the copy.
        await memory.ledger.append("note", {"n": n}, {"text": "last"})

asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
"""


def _sqlite_size(folder: Path) -> int:
    with sqlite3.connect(f"file:{folder / 'ledger.db'}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT coalesce(max(seq) + 1, 0) FROM entries").fetchone()
    return int(row[0])


def _url_with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    user = parts.username or "memseal"
    host = parts.hostname or "127.0.0.1"
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}:{password}@{host}{port}", parts.path, "", ""))


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://memseal:Hunter2-secret@127.0.0.1:1/memseal?schema=m", "Connection refused"),
        ("postgresql://memseal:Hunter2-secret@127.0.0.1:1/memseal?schema=a-b", "schema 'a-b'"),
        ("postgresql://memseal:Hunter2-secret@127.0.0.1:x/memseal", '"port"'),
        ("postgresql://memseal:p%zzHunter2-secret@127.0.0.1:1/memseal", "percent-encoded"),
        ("postgresql://memseal:Hunter2-secret@127.0.0.1:1/m?frob=1", '"frob"'),
        ("postgresql://memseal@127.0.0.1:1/m?password=Hunter2-secret", "Connection refused"),
        ("memseal-target", "postgresql:// URL"),
    ],
)
def test_a_bad_or_unreachable_target_exits_2_naming_the_problem_and_no_password(
    source: Source, url: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", url)
    assert code == 2
    assert named in err
    assert "Hunter2" not in out + err
    assert "Traceback" not in err
    assert "copied" not in out


@needs_postgres
def test_a_wrong_password_exits_2_and_is_not_shown(
    source: Source, capsys: pytest.CaptureFixture[str]
) -> None:
    assert POSTGRES
    url = _with_schema(_url_with_password(POSTGRES, "Wrong-Pa55word"), "migrate_wrong")
    code, out, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", url)
    assert code == 2
    assert "password authentication failed" in err
    assert "Wrong-Pa55word" not in out + err
    code, out, err = _cli(capsys, "verify", url, "--trust", source.trust)
    assert code == 2
    assert "Wrong-Pa55word" not in out + err


def test_a_folder_without_a_ledger_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "postgresql://memseal:Hunter2-secret@127.0.0.1:1/memseal"
    code, out, err = _cli(capsys, "migrate", "--from", str(tmp_path / "none"), "--to", url)
    assert code == 2 and "not a memseal data folder" in err
    code, out, err = _cli(capsys, "migrate", "--from", str(tmp_path), "--to", url)
    assert code == 2 and "no ledger database" in err
    assert "Hunter2" not in out + err


@needs_postgres
def test_checkpoint_prove_and_keys_rotate_take_the_store(
    source: Source,
    target: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memseal.ledger.checkpoint import parse_tlog_proof
    from memseal.ledger.note import parse_vkey
    from memseal.ledger.transparency import open_checkpoint

    folder = tmp_path / "data"
    shutil.copytree(source.folder, folder)
    (folder / "ledger.db").unlink()  # the store alone holds the ledger now
    assert _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)[0] == 0
    code, note, err = _cli(capsys, "checkpoint", "--data", str(folder), "--store", target)
    assert code == 0, err
    current = parse_vkey(_cli(capsys, "keys", "show", "--data", str(folder))[1].strip())
    assert open_checkpoint(note, [current]).size == source.size
    code, proof, err = _cli(capsys, "prove", "--data", str(folder), "--store", target, "--seq", "1")
    assert code == 0, err
    assert parse_tlog_proof(proof).index == 1
    code, rotated, err = _cli(capsys, "keys", "rotate", "--data", str(folder), "--store", target)
    assert code == 0, err
    assert rotated.startswith("rotated: ")
    monkeypatch.setenv(STORE_ENV, target)  # stands in for --store
    code, later, err = _cli(capsys, "checkpoint", "--data", str(folder))
    assert code == 0, err
    rotated_to = parse_vkey(_cli(capsys, "keys", "show", "--data", str(folder))[1].strip())
    assert open_checkpoint(later, [rotated_to]).size == source.size + 1  # the key_rotated entry
    monkeypatch.delenv(STORE_ENV)
    code, summary, err = _cli(capsys, "verify", target, "--trust", source.trust)
    assert code == 0, err
    assert summary.startswith(f"ok: {source.size + 1} entries verified")
    assert _password(target) not in note + proof + rotated + later + summary + err


@needs_postgres
def test_a_copy_that_fails_halfway_leaves_no_ledger_behind(
    source: Source,
    target: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import memseal.cli.pgcopy as migrate_cli
    from memseal.ledger.errors import StorageError

    copied: list[str] = []
    real = migrate_cli._copy_table

    def failing(source_conn: Any, target_conn: Any, table: Any, *rest: Any) -> int:
        if table.name == "memos":  # entries, tree and payloads are in by now
            raise StorageError("the disk filled up (a test)")
        copied.append(table.name)
        return real(source_conn, target_conn, table, *rest)

    monkeypatch.setattr(migrate_cli, "_copy_table", failing)
    code, _, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)
    assert code == 2
    assert "the disk filled up" in err
    assert {"entries", "tree", "payloads"} <= set(copied)
    state = _table_state(target)
    assert state["entries"] == state["tree"] == state["payloads"] == 0
    monkeypatch.setattr(migrate_cli, "_copy_table", real)
    code, _, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)
    assert code == 0, err


@needs_postgres
def test_memseal_store_naming_the_target_does_not_redirect_the_source(
    source: Source,
    target: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(STORE_ENV, target)
    code, out, err = _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)
    assert code == 0, err
    assert f"from: {source.folder / 'ledger.db'}" in out
    assert f"state hash: {source.state_hash} (equal)" in out


@needs_postgres
def test_a_run_exports_from_the_store_as_it_did_from_the_folder(
    source: Source, target: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before, after = tmp_path / "before.bundle", tmp_path / "after.bundle"
    argv = ["export", "--data", str(source.folder), "--run", "run-a"]
    assert _cli(capsys, *argv, "-o", str(before))[0] == 0
    assert _cli(capsys, "migrate", "--from", str(source.folder), "--to", target)[0] == 0
    code, out, err = _cli(capsys, *argv, "--store", target, "-o", str(after))
    assert code == 0, err
    assert _password(target) not in out + err
    assert after.read_bytes() == before.read_bytes()  # the same signed entries, the same bytes
    code, out, err = _cli(capsys, "verify", str(after), "--trust", source.trust)
    assert code == 0, err
