"""Verification with its per-record checks on a thread pool: same answers, in order."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest

import memseal
from memseal.ledger.entry import Entry, make_draft
from memseal.ledger.errors import VerificationError
from memseal.ledger.store import Record, WriteTxn
from memseal.ledger.verify import LedgerVerifier
from memseal.memory import Memory

# More than one of the ledger's verify chunks (4096), with the hand-over inside one.
BEFORE, AFTER = 3_000, 2_500


async def _log(memory: Memory) -> None:
    def many(n: int, tag: str) -> Callable[[WriteTxn], None]:
        def command(txn: WriteTxn) -> None:
            for i in range(n):
                txn.append(make_draft("note", {"i": i, "tag": tag}, {"text": f"{tag} {i}"}))

        return command

    await memory.ledger.store.run(many(BEFORE, "before"))
    await memory.rotate_key()
    await memory.ledger.store.run(many(AFTER, "after"))


async def test_the_pool_follows_a_hand_over_and_the_observer_sees_each_entry_once(
    tmp_path: Path,
) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        await _log(memory)
        size = await memory.ledger.size()
        seen: list[int] = []

        def observe(record: Record, entry: Entry) -> None:
            assert entry.seq == record.seq
            seen.append(record.seq)

        summary = await memory.ledger.verify(workers=2, observe=observe)
        assert summary.size == size == BEFORE + AFTER + 1
        assert len(summary.keys) == 2  # the old key, then the one it handed over to
        assert seen == list(range(size))


async def test_a_bad_signature_past_the_hand_over_is_named_and_not_observed(
    tmp_path: Path,
) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        await _log(memory)
        records = [r async for r in memory.ledger.scan()]
        trust = [memory.ledger.trust_root]
    bad = BEFORE + 10  # signed by the new key, which the pool's snapshot does not hold yet
    forged = msgspec.structs.replace(records[bad], signature=bytes(64))
    records[bad] = forged
    seen: list[int] = []
    with ThreadPoolExecutor(2) as pool:
        verifier = LedgerVerifier(
            trust, executor=pool, workers=2, observe=lambda r, e: seen.append(r.seq)
        )
        with pytest.raises(VerificationError) as caught:
            # The whole log in one chunk: the rotation lands mid-chunk.
            verifier.feed(records)
            verifier.finish()
    assert (caught.value.seq, caught.value.step) == (bad, "signature")
    assert seen == list(range(bad))
