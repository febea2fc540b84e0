"""Hypothesis: Merkle roots and proofs for trees up to 1,000 records.

Correct proofs always verify; a sampled single mutation (a bit of a proof
hash, of a root or of the leaf, the index, a size, one element more or less)
always makes verification fail, except a change of tree size that leaves the
proof's form unchanged: RFC 6962 roots do not commit to the size (a signed
checkpoint does), so there the verifier recomputes the same root and accepts.
"""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st
from merkle_shapes import consistency_shape, inclusion_shape

from memseal.ledger.errors import VerificationError
from memseal.ledger.merkle import (
    MemoryHashStore,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    reference_consistency_proof,
    reference_inclusion_proof,
    reference_root,
    split_stored_hash_index,
    stored_hash_count,
    stored_hash_index,
    stored_hashes_for_record,
    tree_hash,
    verify_consistency,
    verify_inclusion,
)

MAX = 1000
# Leaves of varied length, including empty ones.
LEAVES = [hashlib.sha256(b"%d" % i).digest()[: i % 41] for i in range(MAX)]
LEAF_HASHES = [leaf_hash(x) for x in LEAVES]
# One store serves every size: a tree of n records only reads the first
# stored_hash_count(n) hashes.
STORE = MemoryHashStore()
for _data in LEAVES:
    STORE.append(_data)
ROOTS = [STORE.root(n) for n in range(MAX + 1)]

FAST = settings(deadline=None, max_examples=500)
SLOW = settings(deadline=None, max_examples=100)

sizes = st.integers(min_value=1, max_value=MAX)


def flip(value: bytes, bit: int) -> bytes:
    changed = bytearray(value)
    changed[bit // 8] ^= 1 << (bit % 8)
    return bytes(changed)


def accepted_inclusion(index: int, n: int, leaf: bytes, proof: list[bytes], root: bytes) -> bool:
    try:
        verify_inclusion(index, n, leaf, proof, root)
    except VerificationError:
        return False
    return True


def accepted_consistency(m: int, n: int, old: bytes, new: bytes, proof: list[bytes]) -> bool:
    try:
        verify_consistency(m, n, old, new, proof)
    except VerificationError:
        return False
    return True


bits = st.integers(min_value=0, max_value=255)
MUTATIONS = ["proof bit", "root bit", "leaf bit", "index", "size", "drop", "insert", "length"]


@SLOW
@given(n=sizes)
def test_stored_root_matches_reference(n: int) -> None:
    assert tree_hash(n, STORE.read) == ROOTS[n] == reference_root(LEAVES[:n])


@SLOW
@given(leaves=st.lists(st.binary(max_size=40), max_size=300))
def test_built_tree_matches_reference(leaves: list[bytes]) -> None:
    store = MemoryHashStore()
    for n, data in enumerate(leaves):
        new = stored_hashes_for_record(n, leaf_hash(data), store.read)
        assert store.append(data) == n
        assert store.hashes[stored_hash_count(n) :] == new
        assert len(store.hashes) == stored_hash_count(n + 1)
    assert store.size == len(leaves)
    assert store.root() == reference_root(leaves)


@FAST
@given(index=st.integers(min_value=0, max_value=2**62))
def test_index_split_roundtrip(index: int) -> None:
    level, n = split_stored_hash_index(index)
    assert stored_hash_index(level, n) == index


@FAST
@given(level=st.integers(min_value=0, max_value=62), n=st.integers(min_value=0, max_value=2**40))
def test_coordinates_roundtrip(level: int, n: int) -> None:
    assert split_stored_hash_index(stored_hash_index(level, n)) == (level, n)


@FAST
@given(data=st.data(), n=sizes, mutation=st.sampled_from(MUTATIONS))
def test_inclusion(data: st.DataObject, n: int, mutation: str) -> None:
    index = data.draw(st.integers(min_value=0, max_value=n - 1))
    leaf, root = LEAF_HASHES[index], ROOTS[n]
    proof = inclusion_proof(index, n, STORE.read)
    assert accepted_inclusion(index, n, leaf, proof, root)
    if n <= 200:  # the reference is O(n) per proof
        assert proof == reference_inclusion_proof(index, LEAVES[:n])

    if mutation == "size":
        size = data.draw(st.integers(min_value=0, max_value=2 * MAX).filter(lambda s: s != n))
        same = index < size and inclusion_shape(index, size) == inclusion_shape(index, n)
        assert accepted_inclusion(index, size, leaf, proof, root) is same
        return
    if mutation == "index":
        other = data.draw(st.integers(min_value=-1, max_value=n).filter(lambda i: i != index))
        assert not accepted_inclusion(other, n, leaf, proof, root)
        return
    if mutation == "root bit" or (mutation in ("proof bit", "length") and not proof):
        root = flip(root, data.draw(bits))
    elif mutation == "leaf bit":
        leaf = flip(leaf, data.draw(bits))
    elif mutation == "proof bit":
        i = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        proof[i] = flip(proof[i], data.draw(bits))
    elif mutation == "length":
        i = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        proof[i] = proof[i][: data.draw(st.integers(min_value=0, max_value=31))]
    elif mutation == "drop" and proof:
        del proof[data.draw(st.integers(min_value=0, max_value=len(proof) - 1))]
    else:  # insert (or drop from an empty proof: add instead)
        extra = data.draw(st.sampled_from([leaf, root, *proof]))
        proof.insert(data.draw(st.integers(min_value=0, max_value=len(proof))), extra)
    assert not accepted_inclusion(index, n, leaf, proof, root)


@FAST
@given(data=st.data(), n=sizes, mutation=st.sampled_from(MUTATIONS))
def test_consistency(data: st.DataObject, n: int, mutation: str) -> None:
    m = data.draw(st.integers(min_value=1, max_value=n))
    old, new = ROOTS[m], ROOTS[n]
    proof = consistency_proof(m, n, STORE.read)
    assert accepted_consistency(m, n, old, new, proof)
    if n <= 200:
        assert proof == reference_consistency_proof(m, LEAVES[:n])

    if mutation == "size":
        size = data.draw(st.integers(min_value=0, max_value=2 * MAX).filter(lambda s: s != n))
        same = m <= size and consistency_shape(m, size) == consistency_shape(m, n)
        assert accepted_consistency(m, size, old, new, proof) is same
        return
    if mutation == "index":  # the old size
        other = data.draw(st.integers(min_value=-1, max_value=n + 1).filter(lambda i: i != m))
        assert not accepted_consistency(other, n, old, new, proof)
        return
    if mutation == "root bit" or (mutation in ("proof bit", "length") and not proof):
        new = flip(new, data.draw(bits))
    elif mutation == "leaf bit":  # the old root plays the leaf's part
        old = flip(old, data.draw(bits))
    elif mutation == "proof bit":
        i = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        proof[i] = flip(proof[i], data.draw(bits))
    elif mutation == "length":
        i = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        proof[i] = proof[i][: data.draw(st.integers(min_value=0, max_value=31))]
    elif mutation == "drop" and proof:
        del proof[data.draw(st.integers(min_value=0, max_value=len(proof) - 1))]
    else:
        extra = data.draw(st.sampled_from([old, new, *proof]))
        proof.insert(data.draw(st.integers(min_value=0, max_value=len(proof))), extra)
    assert not accepted_consistency(m, n, old, new, proof)
