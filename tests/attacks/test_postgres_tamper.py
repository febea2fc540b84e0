"""PostgreSQL tamper, edit by edit: tests/integration/test_tamper.py's edits on a PostgreSQL store.

A small ledger (a dozen entries, most with payloads, one redaction) is built
through the public API on a fresh schema; a second psycopg connection then
plays the attacker with write access to the schema but no signing key. Each
edit (a bit flipped in an entry, its stored hash, its signature, a payload or
a salt, with and without the hashes recomputed; a deleted or swapped row; a
payload removed without a redaction; a redacted payload restored; a forged
tail; a tail truncated under a checkpoint) must fail verification naming the
seq. The original bytes are put back after every edit and the ledger must
verify again at the end of each test, so each failure is owed to the edit.

Byte positions are a seeded sample (``SAMPLE`` per field, all of a field
shorter than that); ``MEMSEAL_TAMPER_SAMPLE=0`` tries every byte. Skipped
without ``MEMSEAL_TEST_POSTGRES``.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _scale import SCALE
from stores import POSTGRES, drop_schemas, fresh_url

import memseal
from memseal.ledger.entry import encode_entry, leaf_hash, make_draft, signing_message
from memseal.ledger.merkle import stored_hashes_for_record
from memseal.ledger.note import NoteSigner
from memseal.memory import open_audit

pytestmark = pytest.mark.skipif(POSTGRES is None, reason="MEMSEAL_TEST_POSTGRES is not set")

SIZE = 12
LEAF_SEQ = 5  # a middle entry with a payload: bytes after it must not matter
PAYLOAD_SEQ = 7
REDACTED_SEQ = 3  # its payload is erased by the forget at FORGET_SEQ
FORGET_SEQ = 9
NO_PAYLOAD = {4, 8, FORGET_SEQ}
ATTACKER = NoteSigner.from_seed("attacker", bytes(range(7, 39)))
SAMPLE = int(os.environ.get("MEMSEAL_TAMPER_SAMPLE", str(20 * SCALE)))
SEED = 24


class Attacker:
    """The attacker's psycopg connection (autocommit), on the store's schema."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(statement.replace("?", "%s"), params)

    def one(self, statement: str, params: Sequence[Any] = ()) -> tuple[Any, ...]:
        row = self.execute(statement, params).fetchone()
        assert row is not None, statement
        return tuple(row)

    def all(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.execute(statement, params).fetchall()]

    def get(self, table: str, column: str, seq: int) -> bytes:
        (value,) = self.one(f"SELECT {column} FROM {table} WHERE seq = ?", (seq,))
        return bytes(value)

    def put(self, table: str, column: str, seq: int, value: bytes) -> None:
        self.execute(f"UPDATE {table} SET {column} = ? WHERE seq = ?", (value, seq))

    def rebuild_tree(self) -> None:
        """Recompute every stored Merkle hash from the entries' stored hashes.

        The tree is plain SHA-256 over public data: a capable attacker rebuilds
        it to match the entries they planted, so the checks that need the key
        are what has to catch them.
        """
        hashes = [bytes(h) for (h,) in self.all("SELECT hash FROM entries ORDER BY seq")]
        tree: list[bytes] = []
        for n, digest in enumerate(hashes):
            tree.extend(stored_hashes_for_record(n, digest, lambda idx: [tree[i] for i in idx]))
        with self.conn.transaction():
            self.execute("DELETE FROM tree")
            with self.conn.cursor() as cur:
                cur.executemany("INSERT INTO tree (idx, hash) VALUES (%s, %s)", enumerate(tree))


@dataclass
class Rig:
    memory: memseal.Memory
    db: Attacker
    url: str
    redacted_payload: tuple[bytes, bytes]  # salt, data of REDACTED_SEQ before the forget


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    import psycopg
    from psycopg import sql

    url, schema = fresh_url("tamper")
    try:
        async with memseal.open(
            tmp_path / "data", store=url, embedder=None, checkpoint_interval=None
        ) as memory:
            redacted: tuple[bytes, bytes] | None = None
            for seq in range(SIZE):
                if seq == FORGET_SEQ:
                    record = await memory.ledger.read(REDACTED_SEQ)
                    assert record.salt is not None and record.payload is not None
                    redacted = (record.salt, record.payload)
                    await memory.ledger.append(
                        "memory_forgotten",
                        {"items": [f"itm-{REDACTED_SEQ}"]},
                        redacts=[REDACTED_SEQ],
                    )
                elif seq in NO_PAYLOAD:
                    await memory.ledger.append(
                        "trust_changed", {"item": f"itm-{seq}", "trust": "low"}
                    )
                else:
                    await memory.ledger.append(
                        "memory_stored",
                        {"item": f"itm-{seq}", "ns": "team:acme/agent:writer"},
                        {"text": f"memory number {seq}: prefers dark mode", "tags": ["x" * seq]},
                        mentions=[f"itm-{seq}"],
                    )
            assert redacted is not None
            summary = await memory.ledger.verify(trust=memory.vkey)
            assert (summary.size, summary.redacted) == (SIZE, 1)
            store: Any = memory.ledger.store
            assert (store.dialect, store.schema) == ("postgresql", schema)
            with psycopg.connect(store.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
                yield Rig(memory, Attacker(conn), url, redacted)
                # Every test restores what it tampered with: the ledger is whole again.
                summary = await memory.ledger.verify(trust=memory.vkey)
                assert (summary.size, summary.redacted) == (SIZE, 1)
    finally:
        await drop_schemas([schema])


async def failure(rig: Rig) -> memseal.VerificationError:
    try:
        summary = await rig.memory.ledger.verify(trust=rig.memory.vkey)
    except memseal.VerificationError as exc:
        return exc
    raise AssertionError(f"a tampered ledger verified: {summary}")


def sampled_flips(data: bytes, field: str) -> Iterator[tuple[int, bytes]]:
    """A seeded sample of positions, each with one bit flipped (the bit varies)."""
    positions = list(range(len(data)))
    if 0 < SAMPLE < len(positions):
        positions = sorted(random.Random(f"{SEED}:{field}").sample(positions, SAMPLE))
    for position in positions:
        tampered = bytearray(data)
        tampered[position] ^= 1 << (position % 8)
        yield position, bytes(tampered)


async def flip_sampled_bytes(
    rig: Rig, table: str, column: str, seq: int, steps: set[str], rehash: bool = False
) -> int:
    """Flip sampled bytes of one stored value in turn; every flip must fail at ``seq``.

    Returns how many positions were tried. Misses are collected, so one run
    reports every position the verifier let through or blamed on another seq.
    """
    original = rig.db.get(table, column, seq)
    original_hash = rig.db.get("entries", "hash", seq)
    misses: list[str] = []
    tried = 0
    try:
        for position, tampered in sampled_flips(original, f"{table}.{column}.{rehash}"):
            tried += 1
            rig.db.put(table, column, seq, tampered)
            if rehash:
                rig.db.put("entries", "hash", seq, leaf_hash(tampered))
                rig.db.rebuild_tree()
            error = await failure(rig)
            if error.seq != seq or error.step not in steps:
                misses.append(f"byte {position}: seq {error.seq} {error.step!r}")
    finally:
        rig.db.put(table, column, seq, original)
        rig.db.put("entries", "hash", seq, original_hash)
        if rehash:
            rig.db.rebuild_tree()
    assert not misses, f"{table}.{column} of seq {seq}: " + "; ".join(misses)
    return tried


def expected(length: int) -> int:
    return length if SAMPLE <= 0 else min(SAMPLE, length)


async def test_entry_bit_flip_fails_at_its_seq(rig: Rig) -> None:
    # The stored hash is left alone: the bytes no longer decode or no longer hash to it.
    length = len(rig.db.get("entries", "leaf", LEAF_SEQ))
    tried = await flip_sampled_bytes(rig, "entries", "leaf", LEAF_SEQ, {"format", "stored hash"})
    assert length > 200 and tried == expected(length)


async def test_entry_bit_flip_with_every_hash_recomputed_fails_at_its_seq(rig: Rig) -> None:
    # An attacker who fixes the stored hash and the Merkle tree too is caught by
    # the check the flipped field feeds, always at this seq.
    steps = {"format", "chain", "unknown key", "signature", "payload hash"}
    length = len(rig.db.get("entries", "leaf", LEAF_SEQ))
    tried = await flip_sampled_bytes(rig, "entries", "leaf", LEAF_SEQ, steps, rehash=True)
    assert tried == expected(length)


async def test_stored_hash_bit_flip_fails_at_its_seq(rig: Rig) -> None:
    tried = await flip_sampled_bytes(rig, "entries", "hash", LEAF_SEQ, {"stored hash"})
    assert tried == expected(32)


async def test_signature_bit_flip_fails_at_its_seq(rig: Rig) -> None:
    tried = await flip_sampled_bytes(rig, "entries", "sig", LEAF_SEQ, {"signature"})
    assert tried == expected(64)


async def test_payload_bit_flip_fails_at_its_seq(rig: Rig) -> None:
    length = len(rig.db.get("payloads", "data", PAYLOAD_SEQ))
    tried = await flip_sampled_bytes(rig, "payloads", "data", PAYLOAD_SEQ, {"payload hash"})
    assert length > 50 and tried == expected(length)


async def test_salt_bit_flip_fails_at_its_seq(rig: Rig) -> None:
    tried = await flip_sampled_bytes(rig, "payloads", "salt", PAYLOAD_SEQ, {"payload hash"})
    assert tried == expected(16)


@pytest.mark.parametrize("seq", [0, LEAF_SEQ], ids=["first", "middle"])
async def test_deleted_entry_row_fails_at_its_seq(rig: Rig, seq: int) -> None:
    row = rig.db.one("SELECT seq, leaf, hash, sig FROM entries WHERE seq = ?", (seq,))
    rig.db.execute("DELETE FROM entries WHERE seq = ?", (seq,))
    error = await failure(rig)
    rig.db.execute("INSERT INTO entries (seq, leaf, hash, sig) VALUES (?, ?, ?, ?)", row)
    assert (error.seq, error.step) == (seq, "chain")


async def test_two_rows_swapped_fail_at_the_first(rig: Rig) -> None:
    first, second = 6, 7  # both with payloads; swap everything stored about them
    rows = {
        seq: (
            rig.db.one("SELECT leaf, hash, sig FROM entries WHERE seq = ?", (seq,)),
            rig.db.one("SELECT salt, data FROM payloads WHERE seq = ?", (seq,)),
        )
        for seq in (first, second)
    }

    def store(seq: int, source: int) -> None:
        entry, payload = rows[source]
        rig.db.execute(
            "UPDATE entries SET leaf = ?, hash = ?, sig = ? WHERE seq = ?", (*entry, seq)
        )
        rig.db.execute("UPDATE payloads SET salt = ?, data = ? WHERE seq = ?", (*payload, seq))

    store(first, second)
    store(second, first)
    error = await failure(rig)
    store(first, first)
    store(second, second)
    assert (error.seq, error.step) == (first, "format")  # it says it is seq 7


async def test_two_payloads_swapped_fail_at_the_first(rig: Rig) -> None:
    first, second = 6, 7
    a = rig.db.one("SELECT salt, data FROM payloads WHERE seq = ?", (first,))
    b = rig.db.one("SELECT salt, data FROM payloads WHERE seq = ?", (second,))
    rig.db.execute("UPDATE payloads SET salt = ?, data = ? WHERE seq = ?", (*b, first))
    rig.db.execute("UPDATE payloads SET salt = ?, data = ? WHERE seq = ?", (*a, second))
    error = await failure(rig)
    rig.db.execute("UPDATE payloads SET salt = ?, data = ? WHERE seq = ?", (*a, first))
    rig.db.execute("UPDATE payloads SET salt = ?, data = ? WHERE seq = ?", (*b, second))
    assert (error.seq, error.step) == (first, "payload hash")


async def test_payload_removed_without_redaction_fails_at_its_seq(rig: Rig) -> None:
    row = rig.db.one("SELECT seq, salt, data FROM payloads WHERE seq = ?", (PAYLOAD_SEQ,))
    rig.db.execute("DELETE FROM payloads WHERE seq = ?", (PAYLOAD_SEQ,))
    error = await failure(rig)
    rig.db.execute("INSERT INTO payloads (seq, salt, data) VALUES (?, ?, ?)", row)
    assert (error.seq, error.step) == (PAYLOAD_SEQ, "redaction")


async def test_redacted_payload_restored_fails_at_its_seq(rig: Rig) -> None:
    salt, data = rig.redacted_payload
    rig.db.execute(
        "INSERT INTO payloads (seq, salt, data) VALUES (?, ?, ?)", (REDACTED_SEQ, salt, data)
    )
    error = await failure(rig)
    rig.db.execute("DELETE FROM payloads WHERE seq = ?", (REDACTED_SEQ,))
    assert (error.seq, error.step) == (REDACTED_SEQ, "redaction")


async def test_payload_planted_where_none_is_committed_fails_at_its_seq(rig: Rig) -> None:
    rig.db.execute(
        "INSERT INTO payloads (seq, salt, data) VALUES (?, ?, ?)", (4, bytes(16), b'"planted"')
    )
    error = await failure(rig)
    rig.db.execute("DELETE FROM payloads WHERE seq = 4")
    assert (error.seq, error.step) == (4, "payload hash")


def forged(rig: Rig, seq: int, key_id: str, signer: NoteSigner) -> tuple[bytes, bytes, bytes]:
    """A well-formed entry at ``seq``, chained to the real entry before it."""
    draft = make_draft("memory_stored", {"item": "itm-forged"})
    prev = rig.db.get("entries", "hash", seq - 1).hex()
    leaf = encode_entry(draft, seq=seq, at="2026-11-30T00:00:00.000000Z", prev=prev, key=key_id)
    digest = leaf_hash(leaf)
    return leaf, digest, signer.sign(signing_message(digest))


async def test_tail_replaced_with_forged_entry_fails_at_the_tail(rig: Rig) -> None:
    tail = SIZE - 1
    entry = rig.db.one("SELECT leaf, hash, sig FROM entries WHERE seq = ?", (tail,))
    payload = rig.db.one("SELECT seq, salt, data FROM payloads WHERE seq = ?", (tail,))
    rig.db.execute("DELETE FROM payloads WHERE seq = ?", (tail,))  # the forgery has none
    replace = "UPDATE entries SET leaf = ?, hash = ?, sig = ? WHERE seq = ?"
    own_key_id = rig.memory.vkey.split("+")[1]
    seen: list[tuple[int | None, str]] = []
    try:
        # Claims the trusted key id (as a key-id collision would); another key signed it.
        rig.db.execute(replace, (*forged(rig, tail, own_key_id, ATTACKER), tail))
        error = await failure(rig)  # the stale Merkle tree gives it away ...
        seen.append((error.seq, error.step))
        rig.db.rebuild_tree()
        error = await failure(rig)  # ... rebuilt to match, the signature does
        seen.append((error.seq, error.step))
        # Signed correctly by a key nobody trusts, and naming it.
        rig.db.execute(replace, (*forged(rig, tail, ATTACKER.key_id.hex(), ATTACKER), tail))
        rig.db.rebuild_tree()
        error = await failure(rig)
        seen.append((error.seq, error.step))
    finally:
        rig.db.execute(replace, (*entry, tail))
        rig.db.execute("INSERT INTO payloads (seq, salt, data) VALUES (?, ?, ?)", payload)
        rig.db.rebuild_tree()
    assert seen == [(tail, "tree"), (tail, "signature"), (tail, "unknown key")]


async def test_tail_extended_with_forged_entry_fails_at_the_new_seq(rig: Rig) -> None:
    own_key_id = rig.memory.vkey.split("+")[1]
    rig.db.execute(
        "INSERT INTO entries (seq, leaf, hash, sig) VALUES (?, ?, ?, ?)",
        (SIZE, *forged(rig, SIZE, own_key_id, ATTACKER)),
    )
    try:
        rig.db.rebuild_tree()
        error = await failure(rig)
    finally:
        rig.db.execute("DELETE FROM entries WHERE seq = ?", (SIZE,))
        rig.db.rebuild_tree()
    assert (error.seq, error.step) == (SIZE, "signature")


async def test_truncated_tail_under_a_checkpoint_fails_at_the_tail(rig: Rig) -> None:
    # A checkpoint signed at the full size is what exposes a shorter log.
    note = await rig.memory.ledger.checkpoint()
    tail = SIZE - 1
    entry = rig.db.one("SELECT seq, leaf, hash, sig FROM entries WHERE seq = ?", (tail,))
    payload = rig.db.one("SELECT seq, salt, data FROM payloads WHERE seq = ?", (tail,))
    mentions = rig.db.all("SELECT ref, seq FROM mentions WHERE seq = ?", (tail,))
    stored = rig.db.all("SELECT size, root, note, at FROM checkpoints")
    assert [row[0] for row in stored] == [SIZE]
    rig.db.execute("DELETE FROM entries WHERE seq = ?", (tail,))
    rig.db.execute("DELETE FROM payloads WHERE seq = ?", (tail,))
    # A careful attacker drops the rows that would point past the new end too.
    rig.db.execute("DELETE FROM mentions WHERE seq = ?", (tail,))
    rig.db.rebuild_tree()
    try:
        # The stored checkpoint still says SIZE.
        error = await failure(rig)
        assert (error.seq, error.step) == (tail, "checkpoint")
        # The attacker deletes it too: the shorter chain is whole, as the design says, ...
        rig.db.execute("DELETE FROM checkpoints")
        summary = await rig.memory.ledger.verify(trust=rig.memory.vkey)
        assert summary.size == SIZE - 1
        # ... except to an auditor who kept the checkpoint, live and read-only alike.
        with pytest.raises(memseal.VerificationError) as caught:
            await rig.memory.ledger.verify(trust=rig.memory.vkey, checkpoints=[note])
        assert (caught.value.seq, caught.value.step) == (tail, "checkpoint")
        async with open_audit(rig.url) as ledger:
            with pytest.raises(memseal.VerificationError) as caught:
                await ledger.verify(trust=rig.memory.vkey, checkpoints=[note])
        assert (caught.value.seq, caught.value.step) == (tail, "checkpoint")
    finally:
        rig.db.execute("INSERT INTO entries (seq, leaf, hash, sig) VALUES (?, ?, ?, ?)", entry)
        rig.db.execute("INSERT INTO payloads (seq, salt, data) VALUES (?, ?, ?)", payload)
        for ref, seq in mentions:
            rig.db.execute("INSERT INTO mentions (ref, seq) VALUES (?, ?)", (ref, seq))
        for row in stored:
            rig.db.execute(
                "INSERT INTO checkpoints (size, root, note, at) VALUES (?, ?, ?, ?)", row
            )
        rig.db.rebuild_tree()


async def test_an_auditor_sees_the_same_failure(rig: Rig) -> None:
    # The read-only auditor's path (no private key, the URL alone) reports the same.
    original = rig.db.get("entries", "sig", LEAF_SEQ)
    rig.db.put("entries", "sig", LEAF_SEQ, bytes(64))
    try:
        live = await failure(rig)
        async with open_audit(rig.url) as ledger:
            with pytest.raises(memseal.VerificationError) as caught:
                await ledger.verify(trust=rig.memory.vkey)
    finally:
        rig.db.put("entries", "sig", LEAF_SEQ, original)
    assert (caught.value.seq, caught.value.step) == (live.seq, live.step) == (LEAF_SEQ, "signature")
