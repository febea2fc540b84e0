"""The one check of a signed entry, on the attack vectors every reader shares.

``check_entry`` is what the ledger audit, memo provenance, run leases, bundles
and read proofs call (tests/entry_vectors.py holds the vectors; the console's
port is held to the same list in tests/browser/test_console_entry_check.py).
"""

from __future__ import annotations

import pytest
from entry_vectors import Vector, attacks, log, trusted
from nacl.signing import VerifyKey

from memseal.ledger import (
    KeyChain,
    LedgerVerifier,
    Record,
    VerificationError,
    check_entry,
    decode_entry,
)


def walked() -> KeyChain:
    """The chain after seqs 0 and 1: ``beta`` in force, ``alpha`` retired."""
    chain = KeyChain(trusted())
    for good in log()[:2]:
        chain.hand_over(
            check_entry(
                good.leaf, good.signature, chain, seq=good.seq, stored_hash=good.stored_hash
            )
        )
    return chain


def test_a_good_log_passes_and_each_entry_comes_back_decoded() -> None:
    chain = KeyChain(trusted())
    for good in log():
        entry = check_entry(
            good.leaf, good.signature, chain, seq=good.seq, stored_hash=good.stored_hash
        )
        assert entry == decode_entry(good.leaf)
        chain.hand_over(entry)
    assert [k.name for k in chain.in_force] == ["entry-vectors-beta"]


@pytest.mark.parametrize("attack", attacks(), ids=lambda v: v.name)
def test_each_attack_is_refused_at_its_step(attack: Vector) -> None:
    with pytest.raises(VerificationError) as caught:
        check_entry(
            attack.leaf, attack.signature, walked(), seq=attack.seq, stored_hash=attack.stored_hash
        )
    assert (caught.value.seq, caught.value.step) == (attack.seq, attack.step)


def test_bytes_swapped_under_a_kept_signature_fail_the_signature_with_no_stored_hash() -> None:
    # A bundle or read proof carries no stored hash: the signature is checked over the
    # hash of the bytes given, never over one that travels beside them.
    swapped = next(v for v in attacks() if v.name == "bytes-swapped-under-kept-hash")
    with pytest.raises(VerificationError) as caught:
        check_entry(swapped.leaf, swapped.signature, walked(), seq=2)
    assert caught.value.step == "signature"


def test_the_wrong_seq_is_a_format_failure() -> None:
    good = log()[0]
    with pytest.raises(VerificationError, match="stored at seq 1") as caught:
        check_entry(good.leaf, good.signature, KeyChain(trusted()), seq=1)
    assert caught.value.step == "format"


def test_a_fixed_map_of_keys_trusts_only_what_it_holds() -> None:
    first, _, last = log()
    alpha = trusted()[0]
    keys = {alpha.key_id.hex(): VerifyKey(alpha.public_key)}
    assert check_entry(first.leaf, first.signature, keys, seq=0).seq == 0
    with pytest.raises(VerificationError, match="not trusted") as caught:
        check_entry(last.leaf, last.signature, keys, seq=2)
    assert caught.value.step == "unknown key"


@pytest.mark.parametrize("attack", attacks(), ids=lambda v: v.name)
def test_the_ledger_audit_refuses_each_attack_at_its_step(attack: Vector) -> None:
    # The audit runs the same check per record (on a pool thread or inline).
    verifier = LedgerVerifier(trusted())
    records = [
        Record(
            seq=v.seq,
            leaf=v.leaf,
            leaf_hash=v.stored_hash,
            signature=v.signature,
            salt=None,
            payload=None,
        )
        for v in [*log()[:2], attack]
    ]
    with pytest.raises(VerificationError) as caught:
        verifier.feed(records)
        verifier.finish()
    assert (caught.value.seq, caught.value.step) == (attack.seq, attack.step)
