"""Known answers and exhaustive small trees for the RFC 6962 / RFC 9162 Merkle tree.

Known answers are the RFC 6962 test inputs and the roots, subtree hashes and
proofs published with the reference implementations (transparency-dev/merkle
``testonly/constants.go`` and ``proof/verify_test.go``), used here as data.
The exhaustive part checks every tree size 1..16, every leaf and every older
size, against the plain RFC definitions and under every single mutation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import pytest
from merkle_shapes import consistency_shape, inclusion_shape

from memseal.ledger.errors import InvalidRequest, NotFound, StorageError, VerificationError
from memseal.ledger.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    MemoryHashStore,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
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


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# The RFC 6962 test inputs.
RFC_LEAVES = [
    h(""),
    h("00"),
    h("10"),
    h("2021"),
    h("3031"),
    h("40414243"),
    h("5051525354555657"),
    h("606162636465666768696a6b6c6d6e6f"),
]

# Roots of the trees of the first 0..8 RFC inputs.
RFC_ROOTS = [
    h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
]

# Hashes of every complete subtree of the 8-input tree, by (level, n).
RFC_SUBTREES = {
    (0, 0): h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    (0, 1): h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
    (0, 2): h("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7"),
    (0, 3): h("07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7"),
    (0, 4): h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
    (0, 5): h("4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658"),
    (0, 6): h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
    (0, 7): h("46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"),
    (1, 0): h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    (1, 1): h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
    (1, 2): h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
    (1, 3): h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
    (2, 0): h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    (2, 1): h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
    (3, 0): h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
}

# (0-based leaf index, tree size, audit path); the published table counts leaves from 1.
RFC_INCLUSION = [
    (0, 1, []),
    (0, 8, [RFC_SUBTREES[0, 1], RFC_SUBTREES[1, 1], RFC_SUBTREES[2, 1]]),
    (5, 8, [RFC_SUBTREES[0, 4], RFC_SUBTREES[1, 3], RFC_SUBTREES[2, 0]]),
    (2, 3, [RFC_SUBTREES[1, 0]]),
    (1, 5, [RFC_SUBTREES[0, 0], RFC_SUBTREES[1, 1], RFC_SUBTREES[0, 4]]),
]

# (old size, new size, consistency proof).
RFC_CONSISTENCY = [
    (1, 1, []),
    (1, 8, [RFC_SUBTREES[0, 1], RFC_SUBTREES[1, 1], RFC_SUBTREES[2, 1]]),
    (6, 8, [RFC_SUBTREES[1, 2], RFC_SUBTREES[1, 3], RFC_SUBTREES[2, 0]]),
    (2, 5, [RFC_SUBTREES[1, 1], RFC_SUBTREES[0, 4]]),
    (6, 7, [RFC_SUBTREES[1, 2], RFC_SUBTREES[0, 6], RFC_SUBTREES[2, 0]]),
]

SOME_HASH = h("abacaba000000000000000000000000000000000000000000060061e00123456")


def rfc_store() -> MemoryHashStore:
    store = MemoryHashStore()
    for data in RFC_LEAVES:
        store.append(data)
    return store


# ---------------------------------------------------------------- known answers


def test_empty_root_and_hash_functions() -> None:
    assert HASH_SIZE == 32
    assert RFC_ROOTS[0] == EMPTY_ROOT
    assert leaf_hash(b"") == RFC_SUBTREES[0, 0]
    assert node_hash(RFC_SUBTREES[0, 0], RFC_SUBTREES[0, 1]) == RFC_SUBTREES[1, 0]


@pytest.mark.parametrize("n", range(9))
def test_known_roots(n: int) -> None:
    store = rfc_store()
    assert reference_root(RFC_LEAVES[:n]) == RFC_ROOTS[n]
    assert tree_hash(n, store.read) == RFC_ROOTS[n]
    assert store.root(n) == RFC_ROOTS[n]


def test_known_subtree_hashes_sit_at_their_stored_index() -> None:
    store = rfc_store()
    assert len(store.hashes) == stored_hash_count(8) == 15
    for (level, n), value in RFC_SUBTREES.items():
        assert store.hashes[stored_hash_index(level, n)] == value


@pytest.mark.parametrize(("index", "n", "proof"), RFC_INCLUSION)
def test_known_inclusion_proofs(index: int, n: int, proof: list[bytes]) -> None:
    store = rfc_store()
    assert inclusion_proof(index, n, store.read) == proof
    assert reference_inclusion_proof(index, RFC_LEAVES[:n]) == proof
    verify_inclusion(index, n, leaf_hash(RFC_LEAVES[index]), proof, RFC_ROOTS[n])


@pytest.mark.parametrize(("m", "n", "proof"), RFC_CONSISTENCY)
def test_known_consistency_proofs(m: int, n: int, proof: list[bytes]) -> None:
    store = rfc_store()
    assert consistency_proof(m, n, store.read) == proof
    assert reference_consistency_proof(m, RFC_LEAVES[:n]) == proof
    verify_consistency(m, n, RFC_ROOTS[m], RFC_ROOTS[n], proof)


# ---------------------------------------------------------------- the tlog layout


def test_layout_first_indexes() -> None:
    order = [(0, 0), (0, 1), (1, 0), (0, 2), (0, 3), (1, 1), (2, 0), (0, 4), (0, 5), (1, 2)]
    assert [stored_hash_index(level, n) for level, n in order] == list(range(len(order)))
    assert [split_stored_hash_index(i) for i in range(len(order))] == order


def test_layout_matches_write_order() -> None:
    # Replay the appends: record x writes its leaf, then one node per trailing 1 bit.
    written: list[tuple[int, int]] = []
    for x in range(2048):
        written.append((0, x))
        level = 1
        while (x >> (level - 1)) & 1:
            written.append((level, x >> level))
            level += 1
        assert stored_hash_count(x + 1) == len(written)
    for index, (level, n) in enumerate(written):
        assert stored_hash_index(level, n) == index
        assert split_stored_hash_index(index) == (level, n)


def test_split_inverts_index() -> None:
    for level in range(12):
        for n in range(200):
            assert split_stored_hash_index(stored_hash_index(level, n)) == (level, n)


def test_stored_hash_count() -> None:
    assert [stored_hash_count(n) for n in range(9)] == [0, 1, 3, 4, 7, 8, 10, 11, 15]


def test_stored_hashes_for_record_writes_the_tail() -> None:
    store = MemoryHashStore()
    for n in range(40):
        leaf = leaf_hash(b"record %d" % n)
        new = stored_hashes_for_record(n, leaf, store.read)
        assert new[0] == leaf
        assert len(store.hashes) + len(new) == stored_hash_count(n + 1)
        assert store.append_leaf_hash(leaf) == n
        assert store.hashes[stored_hash_count(n) :] == new


# ---------------------------------------------------------------- store and reads


class CountingReader:
    """A HashReader over a store that records every call."""

    def __init__(self, store: MemoryHashStore) -> None:
        self.store = store
        self.calls: list[list[int]] = []

    def __call__(self, indexes: Sequence[int]) -> list[bytes]:
        self.calls.append(list(indexes))
        return self.store.read(indexes)


def test_memory_store() -> None:
    store = MemoryHashStore()
    assert store.size == 0
    assert store.root() == EMPTY_ROOT
    assert store.append(b"a") == 0
    assert store.append(b"b") == 1
    assert store.size == 2
    assert store.root() == node_hash(leaf_hash(b"a"), leaf_hash(b"b"))
    assert store.root(1) == leaf_hash(b"a")
    with pytest.raises(NotFound):
        store.read([3])
    with pytest.raises(NotFound):
        store.read([-1])


def test_reads_are_one_small_sorted_batch_inside_the_old_tree() -> None:
    store = MemoryHashStore()
    for i in range(130):
        store.append(b"%d" % i)
    reader = CountingReader(store)
    for n in range(1, 131):
        limit = stored_hash_count(n)
        bound = 2 * n.bit_length()
        jobs: list[Callable[[], object]] = [partial(tree_hash, n, reader)]
        jobs += [partial(inclusion_proof, i, n, reader) for i in range(n)]
        jobs += [partial(consistency_proof, m, n, reader) for m in range(1, n + 1)]
        for job in jobs:
            reader.calls.clear()
            job()
            assert len(reader.calls) <= 1
            for call in reader.calls:
                assert call == sorted(set(call))
                assert len(call) <= bound
                # Only hashes that existed when the tree had n records.
                assert all(i < limit for i in call)


def test_no_read_when_nothing_is_needed() -> None:
    reader = CountingReader(rfc_store())
    assert inclusion_proof(0, 1, reader) == []
    assert consistency_proof(5, 5, reader) == []
    assert tree_hash(0, reader) == EMPTY_ROOT
    assert stored_hashes_for_record(0, leaf_hash(b""), reader) == [leaf_hash(b"")]
    assert reader.calls == []


def test_bad_reader_is_a_storage_error() -> None:
    store = rfc_store()
    with pytest.raises(StorageError):
        tree_hash(7, lambda indexes: store.read(indexes)[:-1])
    with pytest.raises(StorageError):
        inclusion_proof(0, 8, lambda indexes: [b"short"] * len(indexes))


def test_invalid_requests() -> None:
    read = rfc_store().read
    for bad in (
        lambda: inclusion_proof(-1, 8, read),
        lambda: inclusion_proof(8, 8, read),
        lambda: inclusion_proof(0, 0, read),
        lambda: consistency_proof(0, 8, read),
        lambda: consistency_proof(0, 0, read),
        lambda: consistency_proof(5, 4, read),
        lambda: tree_hash(-1, read),
        lambda: stored_hash_index(-1, 0),
        lambda: stored_hash_index(0, -1),
        lambda: split_stored_hash_index(-1),
        lambda: stored_hash_count(-1),
        lambda: stored_hashes_for_record(-1, EMPTY_ROOT, read),
        lambda: stored_hashes_for_record(0, b"not a hash", read),
        lambda: reference_inclusion_proof(1, [b""]),
        lambda: reference_consistency_proof(0, [b""]),
    ):
        with pytest.raises(InvalidRequest):
            bad()


# ---------------------------------------------------------------- verifier edges


def test_verification_error_names_the_step() -> None:
    with pytest.raises(VerificationError) as inc:
        verify_inclusion(0, 1, SOME_HASH, [], EMPTY_ROOT)
    assert inc.value.step == "inclusion proof"
    assert inc.value.seq is None
    with pytest.raises(VerificationError) as cons:
        verify_consistency(1, 2, SOME_HASH, EMPTY_ROOT, [SOME_HASH])
    assert cons.value.step == "consistency proof"


def test_inclusion_edges() -> None:
    leaf = leaf_hash(b"data")
    verify_inclusion(0, 1, leaf, [], leaf)  # a one-leaf tree's root is its leaf
    for index, n in ((0, 0), (1, 0), (1, 1), (2, 1), (-1, 1)):
        with pytest.raises(VerificationError):
            verify_inclusion(index, n, leaf, [], leaf)
    for leaf_value, root in ((leaf, b""), (b"", leaf), (b"", b""), (leaf + b"\0", leaf)):
        with pytest.raises(VerificationError):
            verify_inclusion(0, 1, leaf_value, [], root)


def test_consistency_edges() -> None:
    # Size 0 is not a valid old size, as in Go's tlog.CheckTree.
    for m, n in ((0, 0), (0, 1), (0, 8)):
        with pytest.raises(VerificationError):
            verify_consistency(m, n, EMPTY_ROOT, EMPTY_ROOT, [])
    # Equal sizes: empty proof and equal roots, nothing else.
    verify_consistency(3, 3, SOME_HASH, SOME_HASH, [])
    with pytest.raises(VerificationError):
        verify_consistency(3, 3, SOME_HASH, EMPTY_ROOT, [])
    with pytest.raises(VerificationError):
        verify_consistency(3, 3, SOME_HASH, SOME_HASH, [EMPTY_ROOT])
    # Time travel and empty proofs for a real extension.
    for m, n in ((2, 1), (1, 0)):
        with pytest.raises(VerificationError):
            verify_consistency(m, n, SOME_HASH, SOME_HASH, [])
    with pytest.raises(VerificationError):
        verify_consistency(1, 2, RFC_ROOTS[1], RFC_ROOTS[2], [])
    with pytest.raises(VerificationError):
        verify_consistency(1, 1, b"short", b"short", [])


# ---------------------------------------------------------------- exhaustive 1..16

LEAVES = [b"leaf %d" % i for i in range(16)]
LEAF_HASHES = [leaf_hash(x) for x in LEAVES]
STORE = MemoryHashStore()
for _data in LEAVES:
    STORE.append(_data)
ROOTS = [STORE.root(n) for n in range(17)]
OTHER_SIZES = range(-1, 35)


def flips(value: bytes) -> list[bytes]:
    """Every single-bit change of value."""
    out = []
    for byte in range(len(value)):
        for bit in range(8):
            changed = bytearray(value)
            changed[byte] ^= 1 << bit
            out.append(bytes(changed))
    return out


def edits(proof: list[bytes], extra: list[bytes]) -> list[list[bytes]]:
    """The proof with one element removed, or one element inserted anywhere."""
    out = [proof[:i] + proof[i + 1 :] for i in range(len(proof))]
    for i in range(len(proof) + 1):
        out += [[*proof[:i], x, *proof[i:]] for x in extra]
    return out


def inclusion_fails(index: int, n: int, leaf: bytes, proof: list[bytes], root: bytes) -> bool:
    try:
        verify_inclusion(index, n, leaf, proof, root)
    except VerificationError:
        return True
    return False


def consistency_fails(m: int, n: int, old: bytes, new: bytes, proof: list[bytes]) -> bool:
    try:
        verify_consistency(m, n, old, new, proof)
    except VerificationError:
        return True
    return False


@pytest.mark.parametrize("n", range(1, 17))
def test_every_inclusion_proof(n: int) -> None:
    root = ROOTS[n]
    for index in range(n):
        leaf = LEAF_HASHES[index]
        proof = inclusion_proof(index, n, STORE.read)
        assert proof == reference_inclusion_proof(index, LEAVES[:n])
        verify_inclusion(index, n, leaf, proof, root)

        for i, element in enumerate(proof):
            for changed in flips(element):
                assert inclusion_fails(index, n, leaf, [*proof[:i], changed, *proof[i + 1 :]], root)
        for changed in flips(root):
            assert inclusion_fails(index, n, leaf, proof, changed)
        for changed in flips(leaf):
            assert inclusion_fails(index, n, changed, proof, root)
        for other in range(-1, n + 2):
            if other != index:
                assert inclusion_fails(other, n, leaf, proof, root)
        for edited in edits(proof, [leaf, root, SOME_HASH, *proof[:1]]):
            assert inclusion_fails(index, n, leaf, edited, root)
        for i in range(len(proof)):
            for wrong_length in (b"", proof[i][:-1], proof[i] + b"\0"):
                assert inclusion_fails(
                    index, n, leaf, [*proof[:i], wrong_length, *proof[i + 1 :]], root
                )
        # A root does not commit to the tree size (the checkpoint signs it), so
        # another size is accepted exactly when its audit path has the same
        # shape, in which case the verifier recomputes the very same hashes.
        for size in OTHER_SIZES:
            if size != n:
                same = 0 <= index < size and inclusion_shape(index, size) == inclusion_shape(
                    index, n
                )
                assert inclusion_fails(index, size, leaf, proof, root) is not same


@pytest.mark.parametrize("n", range(1, 17))
def test_every_consistency_proof(n: int) -> None:
    new = ROOTS[n]
    for m in range(1, n + 1):
        old = ROOTS[m]
        proof = consistency_proof(m, n, STORE.read)
        assert proof == reference_consistency_proof(m, LEAVES[:n])
        verify_consistency(m, n, old, new, proof)

        for i, element in enumerate(proof):
            for changed in flips(element):
                assert consistency_fails(m, n, old, new, [*proof[:i], changed, *proof[i + 1 :]])
        for changed in flips(old):
            assert consistency_fails(m, n, changed, new, proof)
        for changed in flips(new):
            assert consistency_fails(m, n, old, changed, proof)
        if m != n:
            assert consistency_fails(m, n, new, old, proof)
            assert consistency_fails(m, n, old, new, [])
        for other in range(-1, n + 3):
            if other != m:
                assert consistency_fails(other, n, old, new, proof)
        for edited in edits(proof, [old, new, SOME_HASH, *proof[:1]]):
            assert consistency_fails(m, n, old, new, edited)
        for i in range(len(proof)):
            for wrong_length in (b"", proof[i][:-1], proof[i] + b"\0"):
                assert consistency_fails(
                    m, n, old, new, [*proof[:i], wrong_length, *proof[i + 1 :]]
                )
        # As for inclusion: another new size passes exactly when the proof has
        # the same form for it (the roots carry no size).
        for size in OTHER_SIZES:
            if size != n:
                same = 0 < m <= size and consistency_shape(m, size) == consistency_shape(m, n)
                assert consistency_fails(m, size, old, new, proof) is not same
