"""Checkpoints, proofs and key rotation on a real SQLite ledger."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

import memseal
from memseal.ledger.checkpoint import parse_checkpoint, parse_tlog_proof
from memseal.ledger.errors import InvalidRequest, NotFound, StorageError, VerificationError
from memseal.ledger.merkle import reference_root, verify_consistency, verify_inclusion
from memseal.ledger.note import NoteSigner, open_note, parse_vkey
from memseal.ledger.transparency import LogClient, open_checkpoint
from memseal.memory import Memory, open_audit


def _open(folder: Path, **options: object) -> memseal.memory._Opening:
    return memseal.open(folder, checkpoint_interval=None, **options, embedder=None)  # type: ignore[arg-type]


async def _fill(memory: Memory, n: int) -> None:
    for i in range(n):
        await memory.ledger.append("note", {"i": i}, {"text": f"entry {i}"})


async def test_a_checkpoint_is_a_signed_c2sp_note_of_the_current_tree(tmp_path: Path) -> None:
    async with _open(tmp_path / "d", origin="example.test/memseal") as memory:
        await _fill(memory, 5)
        note = await memory.ledger.checkpoint()
        checkpoint = open_checkpoint(note, [parse_vkey(memory.vkey)], "example.test/memseal")
        leaves = [r.leaf async for r in memory.ledger.scan()]
        assert checkpoint.size == 5
        assert checkpoint.root == reference_root(leaves)
        assert note.startswith("example.test/memseal\n5\n")
        # Cutting again without growth returns the same signed note.
        assert await memory.ledger.checkpoint() == note


async def test_checkpoints_are_cut_every_n_entries(tmp_path: Path) -> None:
    async with _open(tmp_path / "d", checkpoint_every=4) as memory:
        await _fill(memory, 9)
        sizes = [c.size for c in await memory.ledger.checkpoints()]
        assert sizes == [4, 8]


async def test_checkpoints_are_cut_every_t_seconds_when_the_log_grew(tmp_path: Path) -> None:
    import asyncio

    async with memseal.open(
        tmp_path / "d", checkpoint_every=None, checkpoint_interval=0.05, embedder=None
    ) as memory:
        await _fill(memory, 3)
        for _ in range(100):
            if await memory.ledger.checkpoints():
                break
            await asyncio.sleep(0.02)
        assert [c.size for c in await memory.ledger.checkpoints()] == [3]


async def test_the_origin_is_fixed_when_the_ledger_is_made(tmp_path: Path) -> None:
    async with _open(tmp_path / "d", origin="log.example/a"):
        pass
    with pytest.raises(InvalidRequest, match="origin"):
        async with _open(tmp_path / "d", origin="log.example/b"):
            pass
    async with _open(tmp_path / "d") as memory:
        note = await memory.ledger.checkpoint()
        assert note.startswith("log.example/a\n")


async def test_every_inclusion_and_consistency_proof_verifies(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        await _fill(memory, 13)
        leaves = [r.leaf async for r in memory.ledger.scan()]
        for size in range(1, 14):
            root = reference_root(leaves[:size])
            assert await memory.ledger.root(size) == root
            for seq in range(size):
                proof = await memory.ledger.inclusion_proof(seq, size)
                assert proof.root == root
                verify_inclusion(seq, size, proof.leaf_hash, proof.hashes, root)
            for old in range(1, size + 1):
                c = await memory.ledger.consistency_proof(old, size)
                assert c.old_root == reference_root(leaves[:old])
                verify_consistency(old, size, c.old_root, root, c.hashes)


async def test_bad_proof_arguments_are_clear_errors(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        await _fill(memory, 3)
        for seq, size in [(3, None), (-1, None), (0, 4), (2, 2)]:
            with pytest.raises(InvalidRequest):
                await memory.ledger.inclusion_proof(seq, size)
        for old, new in [(0, 3), (4, None), (2, 1)]:
            with pytest.raises(InvalidRequest):
                await memory.ledger.consistency_proof(old, new)
        with pytest.raises(NotFound, match="no checkpoint of size 2"):
            await memory.ledger.tlog_proof(0, 2)


async def test_a_tlog_proof_carries_the_checkpoint_and_verifies(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        await _fill(memory, 6)
        text = await memory.ledger.tlog_proof(4)
        parsed = parse_tlog_proof(text)
        checkpoint = open_checkpoint(parsed.checkpoint, [parse_vkey(memory.vkey)])
        record = await memory.ledger.read(4)
        verify_inclusion(
            parsed.index, checkpoint.size, record.leaf_hash, parsed.hashes, checkpoint.root
        )


async def test_the_log_refuses_to_sign_a_tree_inconsistent_with_a_signed_one(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "d"
    async with _open(folder) as memory:
        await _fill(memory, 4)
        await memory.ledger.checkpoint()
    with sqlite3.connect(folder / "ledger.db") as conn:  # rewrite history under the checkpoint
        conn.execute("UPDATE tree SET hash = zeroblob(32) WHERE idx = 6")  # node (2, 0)
    async with _open(folder) as memory:
        await memory.ledger.append("note", {"i": 99})
        with pytest.raises(VerificationError, match=r"consistency proof|checkpoint"):
            await memory.ledger.checkpoint()
        assert len(await memory.ledger.checkpoints()) == 1


async def test_verify_checks_the_stored_tree(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    async with _open(folder) as memory:
        await _fill(memory, 6)
        vkey = memory.vkey
    with sqlite3.connect(folder / "ledger.db") as conn:
        conn.execute("UPDATE tree SET hash = zeroblob(32) WHERE idx = 5")  # record 3's node
    async with open_audit(folder) as ledger:
        with pytest.raises(VerificationError) as caught:
            await ledger.verify(vkey)
    assert (caught.value.step, caught.value.seq) == ("tree", 3)


async def test_truncation_below_a_stored_or_kept_checkpoint_fails(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    async with _open(folder) as memory:
        await _fill(memory, 6)
        kept = await memory.ledger.checkpoint()
        vkey = memory.vkey
    with sqlite3.connect(folder / "ledger.db") as conn:
        conn.execute("DELETE FROM entries WHERE seq >= 4")
        conn.execute("DELETE FROM payloads WHERE seq >= 4")
        conn.execute("DELETE FROM tree WHERE idx >= 7")
    async with open_audit(folder) as ledger:
        with pytest.raises(VerificationError, match="truncated") as caught:
            await ledger.verify(vkey)
        assert caught.value.step == "checkpoint"
    with sqlite3.connect(folder / "ledger.db") as conn:  # the attacker drops the checkpoints too
        conn.execute("DELETE FROM checkpoints")
    async with open_audit(folder) as ledger:
        assert (await ledger.verify(vkey)).size == 4  # a valid shorter log, on its own...
        with pytest.raises(VerificationError, match="truncated"):
            await ledger.verify(vkey, checkpoints=[kept])  # ...but not against a kept checkpoint


async def test_a_checkpoint_with_a_forged_root_fails_verify(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    async with _open(folder) as memory:
        await _fill(memory, 3)
        await memory.ledger.checkpoint()
        vkey = memory.vkey
    with sqlite3.connect(folder / "ledger.db") as conn:
        conn.execute("UPDATE checkpoints SET note = replace(note, '\n3\n', '\n2\n')")
    async with open_audit(folder) as ledger:
        with pytest.raises(VerificationError) as caught:
            await ledger.verify(vkey)
    assert caught.value.step == "checkpoint"


async def test_a_client_refuses_rollback_forks_and_unproven_growth(tmp_path: Path) -> None:
    async with _open(tmp_path / "a", origin="o.example/log") as memory:
        await _fill(memory, 3)
        small = await memory.ledger.checkpoint()
        await _fill(memory, 3)
        big = await memory.ledger.checkpoint()
        proof = await memory.ledger.consistency_proof(3, 6)
        vkey = parse_vkey(memory.vkey)
    client = LogClient([vkey], "o.example/log")
    client.update(small)
    with pytest.raises(VerificationError):
        client.update(big)  # larger, no proof
    with pytest.raises(VerificationError):
        client.update(big, [bytes(32)] * len(proof.hashes))  # larger, wrong proof
    assert client.update(big, proof.hashes).size == 6
    with pytest.raises(VerificationError, match="older"):
        client.update(small)  # a smaller tree than seen
    # A fork: the same key signs a different tree of the same size elsewhere.
    async with _open(tmp_path / "b", origin="o.example/log") as other:
        await _fill(other, 6)
    forged = _resign(big, tmp_path / "a")
    with pytest.raises(VerificationError, match="forked"):
        client.update(forged)


def _resign(note: str, folder: Path) -> str:
    from memseal.ledger.checkpoint import Checkpoint, format_checkpoint
    from memseal.ledger.keys import load_keys
    from memseal.ledger.note import sign_note

    checkpoint = parse_checkpoint(note.split("\n\n")[0] + "\n")
    fake = Checkpoint(origin=checkpoint.origin, size=checkpoint.size, root=bytes(32))
    return sign_note(format_checkpoint(fake), [load_keys(folder).signer])


async def test_key_rotation_hands_over_and_verify_follows_it(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    async with _open(folder) as memory:
        await _fill(memory, 3)
        old = memory.vkey
        new = await memory.rotate_key()
        assert new != old and memory.vkey == new and memory.trust_root == old
        await _fill(memory, 2)
        records = [r async for r in memory.ledger.scan()]
        entries = [r.entry() for r in records]
        rotation = next(e for e in entries if e.kind == "key_rotated")
        assert rotation.key == parse_vkey(old).key_id.hex()
        assert all(e.key == parse_vkey(new).key_id.hex() for e in entries[rotation.seq + 1 :])
        first_after = next(c for c in await memory.ledger.checkpoints() if c.size > rotation.seq)
        opened = open_note(first_after.note, [parse_vkey(old), parse_vkey(new)])
        assert len(opened.verified) == 2
    async with open_audit(folder) as ledger:
        summary = await ledger.verify(old)
        assert summary.size == 6 and len(summary.keys) == 2
        with pytest.raises(VerificationError, match="unknown key"):
            await ledger.verify(new)  # the new key alone cannot vouch for the old entries
    assert (folder / "keys" / "history").read_text().split() == [old, new]
    async with _open(folder) as memory:  # reopened, the new key signs
        appended = await memory.ledger.append("note", {"after": "reopen"})
        assert (await memory.ledger.read(appended.seq)).entry().key == parse_vkey(new).key_id.hex()


async def test_a_retired_or_foreign_key_cannot_sign_after_the_hand_over(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    async with _open(folder) as memory:
        await _fill(memory, 2)
        old_signer = memory.ledger.signer
        await memory.rotate_key()
        await _fill(memory, 1)
        trust = memory.trust_root
        # The store itself refuses to sign with a retired key when the key in use is
        # not to be found...
        new_signer = memory.ledger.signer
        memory.ledger.store.set_key_source(lambda key_id: None)
        memory.ledger.store.use_signer(old_signer)
        with pytest.raises(StorageError, match="retired key"):
            await memory.ledger.append("note", {"by": "retired key, refused"})
        # ...so the old key (stolen, say) writes around it, erasing the log's record of
        # the hand-over: the store chains the entry, but verify refuses it.
        memory.ledger.store.use_signer(new_signer)
        await memory.ledger.store.run(
            lambda txn: txn.execute("DELETE FROM meta WHERE key = 'signing_key'")
        )
        memory.ledger.store.use_signer(old_signer)
        bad = await memory.ledger.append("note", {"by": "retired key"})
        memory.ledger.store.use_signer(NoteSigner.generate("intruder"))
        await memory.ledger.append("note", {"by": "foreign key"})
    async with open_audit(folder) as ledger:
        with pytest.raises(VerificationError, match="not trusted") as caught:
            await ledger.verify(trust)
    assert caught.value.seq == bad.seq


async def test_a_rotation_interrupted_before_its_entry_is_discarded(tmp_path: Path) -> None:
    from memseal.ledger.keys import begin_rotation

    folder = tmp_path / "d"
    async with _open(folder) as memory:
        await _fill(memory, 1)
        vkey = memory.vkey
    begin_rotation(folder, "memseal-next")  # crashed before the key_rotated entry
    async with _open(folder) as memory:
        assert memory.vkey == vkey
        assert not (folder / "keys" / "ledger.next.skey").exists()


async def test_times_come_from_the_store_clock(tmp_path: Path) -> None:
    fixed = datetime(2026, 1, 2, 3, 4, 5, 600_000, tzinfo=UTC)
    async with _open(tmp_path / "d", clock=lambda: fixed) as memory:
        done = await memory.ledger.append("note", {})
        assert done.at == "2026-01-02T03:04:05.600000Z"
        await memory.ledger.checkpoint()
        assert (await memory.ledger.checkpoints())[0].at == done.at
