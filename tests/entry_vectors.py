"""Vectors for the one check of a signed entry (``memseal.ledger.check_entry``).

A three-entry log from fixed seeds: seq 0 signed by ``alpha``, seq 1 (signed
by ``alpha``) a ``key_rotated`` handing trust to ``beta``, seq 2 signed by
``beta``. Each vector is one attack on seq 2 (or a good entry) with the step
that must refuse it; the Python check and the console's port read the same
list, so the two cannot drift apart unseen.
"""

from __future__ import annotations

from dataclasses import dataclass

from memseal.ledger.entry import GENESIS_PREV, encode_entry, leaf_hash, make_draft, signing_message
from memseal.ledger.note import NoteSigner, VerifierKey, format_vkey

ALPHA = NoteSigner.from_seed("entry-vectors-alpha", bytes(range(32)))
BETA = NoteSigner.from_seed("entry-vectors-beta", bytes(range(32, 64)))
AT = "2026-11-30T00:00:00.000000Z"


@dataclass(frozen=True)
class Vector:
    """One signed entry as a reader gets it, and what the check must say of it."""

    name: str
    seq: int
    leaf: bytes
    signature: bytes
    stored_hash: bytes  # the hash stored beside the bytes (what a store row carries)
    step: str | None  # the step that refuses it; None: it passes
    prev: str  # the leaf hash (hex) of the entry before, for a port that checks the chain


def _signed(seq: int, kind: str, body: dict[str, object], prev: str, signer: NoteSigner) -> bytes:
    key = signer.key_id.hex()
    return encode_entry(make_draft(kind, body), seq=seq, at=AT, prev=prev, key=key)


def _sign(signer: NoteSigner, leaf: bytes) -> bytes:
    return signer.sign(signing_message(leaf_hash(leaf)))


def trusted() -> list[VerifierKey]:
    """The keys the auditor starts from: ``alpha`` only."""
    return [ALPHA.verifier]


def log() -> list[Vector]:
    """The good log, in seq order (a chain walked through it hands over to ``beta``)."""
    first = _signed(0, "memory_stored", {"item": "itm-0"}, GENESIS_PREV, ALPHA)
    vkey = format_vkey(BETA.name, bytes(BETA.signing_key.verify_key))
    rotate = _signed(1, "key_rotated", {"vkey": vkey}, leaf_hash(first).hex(), ALPHA)
    last = _signed(2, "memory_stored", {"item": "itm-2"}, leaf_hash(rotate).hex(), BETA)
    out: list[Vector] = []
    prev = GENESIS_PREV
    for seq, (leaf, signer) in enumerate([(first, ALPHA), (rotate, ALPHA), (last, BETA)]):
        out.append(Vector("good", seq, leaf, _sign(signer, leaf), leaf_hash(leaf), None, prev))
        prev = leaf_hash(leaf).hex()
    return out


def attacks() -> list[Vector]:
    """Seq 2 attacked, each way once (checked after seqs 0 and 1 walked the chain)."""
    good = log()[2]
    leaf, sig, prev = good.leaf, good.signature, good.prev
    flipped = bytes([sig[0] ^ 0x01]) + sig[1:]
    # Signed by alpha, which the key_rotated at seq 1 retired: a wrong key in the chain.
    by_alpha = _signed(2, "memory_stored", {"item": "itm-2"}, prev, ALPHA)
    # One digit of the time changed: decodes, canonical, but the kept hash and signature
    # are the original bytes'.
    at = leaf.index(b'"at":"') + len(b'"at":"')
    swapped = leaf[:at] + b"1" + leaf[at + 1 :]
    not_utf8 = leaf.replace(b'"itm-2"', b'"itm-\xff"')
    body_not_json = leaf.replace(b'{"item":"itm-2"}', b'{"item":itm-2}')
    return [
        Vector("signature-byte-flipped", 2, leaf, flipped, leaf_hash(leaf), "signature", prev),
        Vector(
            "signed-by-a-retired-key",
            2,
            by_alpha,
            _sign(ALPHA, by_alpha),
            leaf_hash(by_alpha),
            "unknown key",
            prev,
        ),
        Vector(
            "bytes-swapped-under-kept-hash", 2, swapped, sig, leaf_hash(leaf), "stored hash", prev
        ),
        Vector("stored-hash-of-other-bytes", 2, leaf, sig, leaf_hash(swapped), "stored hash", prev),
        Vector(
            "bytes-not-utf8",
            2,
            not_utf8,
            _sign(BETA, not_utf8),
            leaf_hash(not_utf8),
            "format",
            prev,
        ),
        Vector(
            "body-not-json",
            2,
            body_not_json,
            _sign(BETA, body_not_json),
            leaf_hash(body_not_json),
            "format",
            prev,
        ),
    ]
