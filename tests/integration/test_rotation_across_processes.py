"""A key rotation in one process, appends in another: never an entry signed by a retired key.

Two instances open one ledger (one SQLite file, or one PostgreSQL schema) as two
server processes would. After the first rotates its key, the second's next
append either signs with the new key (it shares the data folder, which holds
it) or, holding only a copy of the folder from before the rotation, is refused
with nothing written. Either way the ledger verifies from its trust root.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import memseal
from memseal.engine import Learning
from memseal.ledger.errors import StorageError

PLACE = "user:ann"


async def test_a_process_sharing_the_folder_signs_with_the_new_key(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    async with (
        memseal.open(folder, store=store_url, embedder=None) as a,
        memseal.open(folder, store=store_url, embedder=None) as b,
    ):
        await b.engine.store(Learning(text="before the rotation"), namespace=PLACE)
        old = b.vkey
        new = await a.rotate_key()
        assert new != old
        stored = await b.engine.store(Learning(text="after the rotation"), namespace=PLACE)
        assert b.vkey == new
        record = await b.ledger.read(stored.seq)
        assert record.entry().key == a.ledger.store.signer.key_id.hex()
        summary = await b.ledger.verify(b.trust_root)
        assert len(summary.keys) == 2


async def test_a_process_with_only_the_old_key_is_refused_and_writes_nothing(
    tmp_path: Path, store_url: str | None
) -> None:
    if store_url is None:
        pytest.skip("two hosts share a ledger only through PostgreSQL")
    folder, copy = tmp_path / "data", tmp_path / "elsewhere"
    async with memseal.open(folder, store=store_url, embedder=None) as a:
        await a.engine.store(Learning(text="first"), namespace=PLACE)
        shutil.copytree(folder, copy)  # another host's copy of the keys, made before
        async with memseal.open(copy, store=store_url, embedder=None) as b:
            await a.rotate_key()
            size = await a.ledger.size()
            with pytest.raises(StorageError, match="retired key"):
                await b.engine.store(Learning(text="signed by whom?"), namespace=PLACE)
            assert await a.ledger.size() == size
            await a.ledger.verify(a.trust_root)


async def test_runs_of_the_process_that_took_the_new_key_resume_from_their_memos(
    tmp_path: Path, store_url: str | None
) -> None:
    from memseal import ToolScope

    folder = tmp_path / "data"
    scope = ToolScope.placed_at("team:acme/agent:writer")
    call = ("memory_store", {"learning": {"text": "recorded after the hand-over"}})
    async with (
        memseal.open(folder, store=store_url, embedder=None) as a,
        memseal.open(folder, store=store_url, embedder=None) as b,
    ):
        await a.rotate_key()
        async with b.run("r1", scope) as run:  # b signs with the key a rotated to
            recorded = await run.call(*call)
        async with b.run("r1", scope, mode="strict") as run:
            assert await run.call(*call) == recorded  # the memo verifies against the new key
