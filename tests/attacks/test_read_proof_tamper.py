"""Attacks on a read proof: every changed byte fails, and so does every entry left out.

The proof under attack is a real one (the session of tests/read_proof_support.py)
of an exact fetch, with every text disclosed so it re-derives byte for byte, and
of a list proven within its reach. Edits are made on the decoded proof and
re-encoded canonically, so each one gets past the format check and meets the
check it is aimed at; a raw flip of any byte of the file fails too.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import msgspec
import pytest
from read_proof_support import FETCH, LIST, SEEN_WRITE, edit, prove, record, without

from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.note import NoteSigner, parse_vkey
from memseal.replay.evidence.read_proof import (
    ProofEntry,
    ReadProof,
    ReadProofError,
    decode_read_proof,
    verify_read,
)


class Session(msgspec.Struct, kw_only=True):
    vkey: str
    seen_write: int
    fetch: bytes  # the exact fetch, every text disclosed
    listing: bytes  # the list, texts in its reach only
    recall_proof: bytes  # a proof of another read of the run (another observed size)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    async def make() -> Session:
        recorded = await record(tmp_path_factory.mktemp("attack") / "data")
        return Session(
            vkey=recorded.vkey,
            seen_write=recorded.seen_write,
            fetch=await prove(recorded.folder, FETCH, disclose="all"),
            listing=await prove(recorded.folder, LIST),
            recall_proof=await prove(recorded.folder, 5, disclose="all"),
        )

    return asyncio.run(make())


def fails(data: bytes, vkey: str) -> ReadProofError | VerificationError:
    with pytest.raises(VerificationError) as failed:
        asyncio.run(verify_read(data, vkey))
    return failed.value


def flip(value: bytes, at: int = 0) -> bytes:
    changed = bytearray(value)
    changed[at % len(changed)] ^= 0x01
    return bytes(changed)


def replace_entry(proof: ReadProof, where: str, index: int, /, **fields: Any) -> dict[str, Any]:
    items = list(getattr(proof, where))
    items[index] = msgspec.structs.replace(items[index], **fields)
    return {where: tuple(items)}


def test_the_untouched_proofs_verify(session: Session) -> None:
    assert asyncio.run(verify_read(session.fetch, session.vkey)).how == "byte for byte"
    assert asyncio.run(verify_read(session.listing, session.vkey)).how == "byte for byte"


def test_a_write_the_read_saw_left_out_of_the_prefix_fails_naming_it(session: Session) -> None:
    proof = decode_read_proof(session.fetch)
    written = proof.prefix[session.seen_write]
    assert SEEN_WRITE.encode() in (written.payload or b""), "not the write the fetch saw"
    failed = fails(without(session.fetch, session.seen_write), session.vkey)
    assert failed.step == "completeness" and failed.seq == session.seen_write, failed
    assert f"entry {session.seen_write} is missing" in str(failed)


def test_the_prefix_cut_after_the_write_fails(session: Session) -> None:
    proof = decode_read_proof(session.fetch)
    cut = edit(session.fetch, prefix=proof.prefix[: session.seen_write])
    failed = fails(cut, session.vkey)
    assert failed.step == "completeness" and failed.seq == session.seen_write, failed


def test_the_write_s_text_withheld_fails_naming_it(session: Session) -> None:
    # The entry stays (the root still checks out), its text does not: the read would
    # re-derive without it, so the verifier refuses before re-deriving.
    proof = decode_read_proof(session.fetch)
    stripped = edit(
        session.fetch,
        **replace_entry(proof, "prefix", session.seen_write, payload=None, salt=None),
    )
    failed = fails(stripped, session.vkey)
    assert failed.step == "payload hash" and failed.seq == session.seen_write, failed
    assert "in the read's reach but its payload is missing" in str(failed)
    for seq, shown in ((session.seen_write, "payload"), (session.seen_write, "proof")):
        hidden = edit(session.fetch, **replace_entry(proof, "prefix", seq, **{shown: None}))
        assert fails(hidden, session.vkey).seq == seq


@pytest.mark.parametrize("part", ["leaf", "sig", "payload", "salt", "proof"])
def test_a_flipped_byte_in_any_entry_fails(session: Session, part: str) -> None:
    proof = decode_read_proof(session.fetch)
    rng = random.Random(part)
    targets = [("prefix", i) for i in range(len(proof.prefix))] + [
        ("later", i) for i in range(len(proof.later))
    ]
    tried = 0
    for where, index in targets:
        item: ProofEntry = getattr(proof, where)[index]
        value = getattr(item, part)
        if not value:
            continue
        if part == "proof":
            hashes = list(value)
            hashes[rng.randrange(len(hashes))] = flip(hashes[0], rng.randrange(32))
            changed: Any = tuple(hashes)
        else:
            changed = flip(value, rng.randrange(len(value)))
        data = edit(session.fetch, **replace_entry(proof, where, index, **{part: changed}))
        failed = fails(data, session.vkey)
        assert failed.seq == item.seq, (where, index, part, failed)
        tried += 1
    assert tried >= 3, f"no entry carries a {part}"


def test_a_flipped_byte_in_a_checkpoint_or_the_consistency_proof_fails(session: Session) -> None:
    proof = decode_read_proof(session.fetch)
    for name in ("checkpoint", "latest"):
        note: str = getattr(proof, name)
        # A digit of the size, a character of the root, a character of the signature.
        for at in (note.index("\n") + 1, note.index("\n") + 8, len(note) - 5):
            changed = note[:at] + ("1" if note[at] != "1" else "2") + note[at + 1 :]
            failed = fails(edit(session.fetch, **{name: changed}), session.vkey)
            assert failed.step in ("checkpoint", "completeness", "tree root"), failed
    hashes = list(proof.consistency)
    assert hashes, "the proof has no consistency hashes to attack"
    for index in range(len(hashes)):
        bad = list(hashes)
        bad[index] = flip(bad[index], index)
        failed = fails(edit(session.fetch, consistency=tuple(bad)), session.vkey)
        assert failed.step == "consistency", failed
    failed = fails(edit(session.fetch, consistency=tuple(hashes[:-1])), session.vkey)
    assert failed.step == "consistency", failed


def test_a_raw_byte_flipped_anywhere_in_the_file_fails(session: Session) -> None:
    rng = random.Random(7)
    data = session.listing
    for at in rng.sample(range(len(data)), 60):
        changed = bytearray(data)
        changed[at] ^= rng.choice((0x01, 0x02, 0x20))
        with pytest.raises(VerificationError):
            asyncio.run(verify_read(bytes(changed), session.vkey))


def test_a_replaced_result_fails(session: Session) -> None:
    proof = decode_read_proof(session.fetch)
    call = proof.later[-1]
    assert call.payload is not None
    # The agent saw another text: the payload no longer matches its signed hash.
    other = call.payload.replace(b"vault path ops/deploy", b"vault path ops/decoy")
    assert other != call.payload
    failed = fails(
        edit(session.fetch, **replace_entry(proof, "later", -1, payload=other)), session.vkey
    )
    assert failed.step == "payload hash" and failed.seq == call.seq, failed
    # Another read's call entry (its own bytes, signature and payload) in its place.
    recall = decode_read_proof(session.recall_proof).later[-1]
    swapped = edit(session.fetch, later=(*proof.later[:-1], recall))
    failed = fails(swapped, session.vkey)
    assert failed.step in ("read", "inclusion", "completeness"), failed


def test_an_older_checkpoint_or_an_extra_call_fails(session: Session) -> None:
    proof = decode_read_proof(session.fetch)
    other = decode_read_proof(session.recall_proof)
    assert other.checkpoint != proof.checkpoint
    failed = fails(edit(session.fetch, checkpoint=other.checkpoint), session.vkey)
    assert failed.step == "completeness", failed
    # The run's later call entry added: one call, and only one, is proven.
    extra = edit(
        session.fetch,
        later=tuple(sorted((*proof.later, other.later[-1]), key=lambda e: e.seq)),
        latest=other.latest,
        consistency=(),
    )
    assert fails(extra, session.vkey).step in ("read", "consistency", "inclusion")


def test_a_stranger_s_key_a_truncated_file_and_another_spelling_fail(session: Session) -> None:
    stranger = NoteSigner.generate("stranger").verifier.text
    failed = fails(session.listing, stranger)
    assert failed.step == "unknown key" and failed.seq == 0, failed
    assert fails(session.listing[: len(session.listing) // 2], session.vkey).step == "truncated"
    spaced = session.listing.replace(b'","', b'", "', 1)
    assert fails(spaced, session.vkey).step == "format"
    assert fails(b'{"format":"memseal/bundle@v2"}', session.vkey).step == "format"
    with pytest.raises(InvalidRequest, match="`trust`"):
        asyncio.run(verify_read(session.listing, "not a key"))


def test_without_the_write_the_read_would_have_returned_something_else(session: Session) -> None:
    """Why completeness is checked: re-derived with the seen write as a gap, the fetch differs."""
    from memseal.replay.evidence import _read_proof_verify as steps
    from memseal.replay.evidence._read_proof_format import in_reach, scope_of

    proof = decode_read_proof(session.fetch)
    walked = steps._walk(proof, [parse_vkey(session.vkey)])
    found = steps._the_call(proof, walked)
    entries = [walked.entries[e.seq] for e in proof.prefix]
    copied = in_reach(None, entries) - {session.seen_write}
    derived = asyncio.run(steps._rederive(proof, walked, copied, found, None))
    assert derived != found.result
    assert SEEN_WRITE not in str(derived) and SEEN_WRITE in str(found.result)
    assert scope_of(found.scope_started).place == "team:acme/agent:writer"
