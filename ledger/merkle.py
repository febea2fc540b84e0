"""RFC 6962 / RFC 9162 Merkle tree over the ledger, with interior hashes stored as it grows.

Hashing is exactly RFC 9162 section 2.1.1 with SHA-256: the empty tree is
``SHA-256("")``, a leaf is ``SHA-256(0x00 || data)``, an interior node is
``SHA-256(0x01 || left || right)``, and a tree of n > 1 leaves splits at the
largest power of two smaller than n. Proofs are the audit paths of section
2.1.3 and the consistency proofs of section 2.1.4, so any standard
transparency-log verifier (Go's ``golang.org/x/mod/sumdb/tlog``,
``transparency-dev/merkle``) accepts them unmodified.

Stored-hash layout
------------------
The log never rehashes itself to answer a query. Instead every *complete*
subtree gets one stored hash, written once, at the moment the record that
completes it is appended, and never rewritten. A subtree is named by
``(level, n)``: level 0 holds the leaf hashes, and ``(L, n)`` is the hash of
the 2**L leaves ``[n * 2**L, (n + 1) * 2**L)``. Stored hashes are numbered in
the order they are written; appending record x writes its leaf hash and then
one node hash for every trailing 1 bit of x (each such bit closes a subtree)::

    record   0      1            2      3                    4
    writes   (0,0)  (0,1) (1,0)  (0,2)  (0,3) (1,1) (2,0)    (0,4)
    index    0      1     2      3      4     5     6        7

This is the layout of Go's tlog (after Crosby and Wallach, "Efficient Data
Structures for Tamper-Evident Logging", section 3.3), chosen because:

* it is append-only: a table keyed by the integer index only ever grows;
* the index is a pure function of ``(level, n)`` (see :func:`stored_hash_index`),
  so a reader fetches exactly the rows it needs in one ``IN (...)`` query;
* a tree of n records has written exactly ``2n - popcount(n)`` hashes (one per
  complete subtree), a *prefix* of the table, so proofs and roots for any
  historical size are still answerable from the same rows;
* the root of any size, and every proof element, is a fold of at most
  ``log2(n)`` complete subtrees, so every query reads O(log n) hashes.

The closed form behind the index: node ``(L, n)`` is written right after the
leaf hash of its last leaf ``x = (n + 1) * 2**L - 1``, as the L-th hash after
it. Before record x, the records ``0..x-1`` have written ``2x - popcount(x)``
hashes, so the node lands at ``2x - popcount(x) + L``.

One deliberate difference from Go's tlog: the root of the empty tree is
``SHA-256("")`` (RFC 9162), not an all-zero hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from .errors import InvalidRequest, NotFound, StorageError, VerificationError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "HashReader",
    "MemoryHashStore",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "reference_consistency_proof",
    "reference_inclusion_proof",
    "reference_root",
    "split_stored_hash_index",
    "stored_hash_count",
    "stored_hash_index",
    "stored_hashes_for_record",
    "tree_hash",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
EMPTY_ROOT: bytes = hashlib.sha256(b"").digest()

HashReader = Callable[[Sequence[int]], Sequence[bytes]]
"""Reads stored hashes: given stored-hash indexes, returns those hashes in the same order.

Every function here makes at most one call per query, with the indexes sorted
ascending and without duplicates, so an adapter can answer it with a single
``SELECT ... WHERE idx IN (...)``.
"""

_INCLUSION = "inclusion proof"
_CONSISTENCY = "consistency proof"


def leaf_hash(data: bytes) -> bytes:
    """The RFC 6962 leaf hash ``SHA-256(0x00 || data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The RFC 6962 interior node hash ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


# --------------------------------------------------------------------------
# Stored-hash layout
# --------------------------------------------------------------------------


def _hashes_before(x: int) -> int:
    # Records 0..x-1 have written one hash per complete subtree of an x-leaf
    # tree: sum over levels of floor(x / 2**L), which is 2x - popcount(x).
    return 2 * x - x.bit_count()


def stored_hash_index(level: int, n: int) -> int:
    """The stored-hash index of subtree ``(level, n)`` (leaves ``[n*2**level, (n+1)*2**level)``)."""
    if level < 0 or n < 0:
        raise InvalidRequest(f"stored hash coordinates must be >= 0, got level={level} n={n}")
    last_leaf = ((n + 1) << level) - 1
    return _hashes_before(last_leaf) + level


def split_stored_hash_index(index: int) -> tuple[int, int]:
    """The inverse of :func:`stored_hash_index`: ``index -> (level, n)``."""
    if index < 0:
        raise InvalidRequest(f"stored hash index must be >= 0, got {index}")
    # Find the record x whose batch of writes holds this index. Record x's batch
    # starts at 2x - popcount(x), which is <= 2x, so x >= index // 2; and the
    # batches after that start at most log2(index) records later.
    x = index // 2
    while _hashes_before(x + 1) <= index:
        x += 1
    level = index - _hashes_before(x)
    return level, x >> level


def stored_hash_count(n: int) -> int:
    """How many hashes a tree of n records has stored (indexes ``0 .. count-1``)."""
    if n < 0:
        raise InvalidRequest(f"tree size must be >= 0, got {n}")
    return _hashes_before(n)


def _read_hashes(read: HashReader, indexes: list[int]) -> list[bytes]:
    # The reader is a storage adapter; a short or malformed answer is a storage
    # fault, not a verification failure, and must not be folded into a root.
    if not indexes:
        return []
    got = list(read(indexes))
    if len(got) != len(indexes):
        raise StorageError(f"hash reader returned {len(got)} hashes for {len(indexes)} indexes")
    for index, value in zip(indexes, got, strict=True):
        if len(value) != HASH_SIZE:
            raise StorageError(f"stored hash {index} has {len(value)} bytes, want {HASH_SIZE}")
    return got


def stored_hashes_for_record(n: int, leaf: bytes, read: HashReader) -> list[bytes]:
    """The hashes to store when appending record n (0-based) whose leaf hash is ``leaf``.

    They belong at indexes ``stored_hash_count(n) .. stored_hash_count(n + 1) - 1``:
    the leaf hash itself, then one node hash per subtree that record n completes.
    Reads the left siblings of those subtrees (at most log2(n) hashes, one call).
    """
    if n < 0:
        raise InvalidRequest(f"record index must be >= 0, got {n}")
    if len(leaf) != HASH_SIZE:
        raise InvalidRequest(f"leaf hash must be {HASH_SIZE} bytes, got {len(leaf)}")
    # Each trailing 1 bit of n closes one subtree; at level i the new subtree's
    # left half is the complete subtree (i, (n >> i) - 1). Highest level first
    # keeps the indexes ascending.
    closed = (~n & (n + 1)).bit_length() - 1
    siblings = _read_hashes(
        read, [stored_hash_index(i, (n >> i) - 1) for i in reversed(range(closed))]
    )
    out = [leaf]
    h = leaf
    for sibling in reversed(siblings):
        h = node_hash(sibling, h)
        out.append(h)
    return out


# --------------------------------------------------------------------------
# Roots and proofs from stored hashes
# --------------------------------------------------------------------------


def _split(size: int) -> int:
    # RFC 9162 2.1.1: the largest power of two strictly smaller than size (>= 2).
    return 1 << ((size - 1).bit_length() - 1)


def _subtree_indexes(lo: int, hi: int) -> list[int]:
    # MTH(D[lo:hi]) for a range that RFC splitting produces is a right-leaning
    # fold of complete subtrees of decreasing size; each is one stored hash.
    out = []
    while lo < hi:
        level = (hi - lo).bit_length() - 1
        assert lo % (1 << level) == 0, "RFC ranges are aligned to their largest subtree"
        out.append(stored_hash_index(level, lo >> level))
        lo += 1 << level
    return out


def _fold(hashes: list[bytes]) -> bytes:
    h = hashes[-1]
    for left in reversed(hashes[:-1]):
        h = node_hash(left, h)
    return h


def _range_hashes(ranges: list[tuple[int, int]], read: HashReader) -> list[bytes]:
    # One batched read for every range: collect, dedupe, sort ascending.
    plans = [_subtree_indexes(lo, hi) for lo, hi in ranges]
    wanted = sorted({i for plan in plans for i in plan})
    table = dict(zip(wanted, _read_hashes(read, wanted), strict=True))
    return [_fold([table[i] for i in plan]) for plan in plans]


def tree_hash(n: int, read: HashReader) -> bytes:
    """The root of the first n records (``EMPTY_ROOT`` for 0); reads <= log2(n) + 1 hashes."""
    if n < 0:
        raise InvalidRequest(f"tree size must be >= 0, got {n}")
    if n == 0:
        return EMPTY_ROOT
    return _range_hashes([(0, n)], read)[0]


def _inclusion_ranges(index: int, n: int) -> list[tuple[int, int]]:
    # RFC 9162 2.1.3.1 PATH(m, D_n), unrolled: walk from the root towards the
    # leaf, noting the sibling range at each split; the proof lists them
    # leaf-to-root, so reverse at the end.
    ranges = []
    lo, hi = 0, n
    while hi - lo > 1:
        mid = lo + _split(hi - lo)
        if index < mid:
            ranges.append((mid, hi))
            hi = mid
        else:
            ranges.append((lo, mid))
            lo = mid
    ranges.reverse()
    return ranges


def _consistency_ranges(m: int, n: int) -> list[tuple[int, int]]:
    # RFC 9162 2.1.4.1 SUBPROOF(m, D_n, true), unrolled. The flag b of the RFC
    # stays true exactly while the walk has only gone left, i.e. while lo == 0;
    # then the old tree is the whole current subtree and the verifier already
    # has its hash, so it is left out.
    ranges = []
    lo, hi = 0, n
    while hi != m:
        mid = lo + _split(hi - lo)
        if m <= mid:
            ranges.append((mid, hi))
            hi = mid
        else:
            ranges.append((lo, mid))
            lo = mid
    if lo != 0:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


def inclusion_proof(index: int, n: int, read: HashReader) -> list[bytes]:
    """The RFC 9162 audit path for record ``index`` in the tree of n records, leaf to root.

    Byte-for-byte what Go's ``tlog.ProveRecord(n, index, r)`` returns.
    """
    if not 0 <= index < n:
        raise InvalidRequest(f"inclusion proof needs 0 <= index < tree size, got {index}, {n}")
    return _range_hashes(_inclusion_ranges(index, n), read)


def consistency_proof(m: int, n: int, read: HashReader) -> list[bytes]:
    """The RFC 9162 consistency proof from the tree of m records to the tree of n records.

    Needs ``0 < m <= n``; empty when m == n. Byte-for-byte what Go's
    ``tlog.ProveTree(n, m, r)`` returns.
    """
    if not 0 < m <= n:
        raise InvalidRequest(f"consistency proof needs 0 < old size <= new size, got {m}, {n}")
    return _range_hashes(_consistency_ranges(m, n), read)


# --------------------------------------------------------------------------
# Verification (RFC 9162 2.1.3.2 and 2.1.4.2)
# --------------------------------------------------------------------------


def _check_sizes(step: str, named: Sequence[tuple[str, bytes]], proof: Sequence[bytes]) -> None:
    # Go's tlog.Hash is a fixed 32-byte array, so it cannot even express a hash
    # of another length; reject those up front to accept exactly what Go does.
    for name, value in named:
        if len(value) != HASH_SIZE:
            raise VerificationError(f"{name} is {len(value)} bytes, want {HASH_SIZE}", step=step)
    for i, value in enumerate(proof):
        if len(value) != HASH_SIZE:
            raise VerificationError(
                f"proof element {i} is {len(value)} bytes, want {HASH_SIZE}", step=step
            )


def verify_inclusion(index: int, n: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Check that ``leaf`` (a leaf hash) is record ``index`` of the n-record tree with ``root``.

    Returns None, or raises :class:`VerificationError` with step ``"inclusion proof"``.
    """
    _check_sizes(_INCLUSION, [("leaf hash", leaf), ("root", root)], proof)
    # 1. The leaf must lie inside the tree (Go also rejects negative values).
    if index < 0 or n < 0 or index >= n:
        raise VerificationError(f"leaf index {index} is not inside tree size {n}", step=_INCLUSION)
    # 2. fn walks up from the leaf, sn from the last leaf of the tree.
    fn, sn = index, n - 1
    # 3. Start from the leaf hash.
    r = leaf
    # 4. Fold in each proof element.
    for p in proof:
        # 4a. Above the root: the proof is too long.
        if sn == 0:
            raise VerificationError("proof has more elements than the path", step=_INCLUSION)
        # 4b. fn is a right child, or the last node on its level (a left child
        #     with no right sibling at this level): the element is on the left.
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            # 4b-ii. Skip the levels where fn is the last node and has no sibling.
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        # 4c. Up one level.
        fn >>= 1
        sn >>= 1
    # 5. The path must end exactly at the root, and reproduce it.
    if sn != 0:
        raise VerificationError("proof has fewer elements than the path", step=_INCLUSION)
    if r != root:
        raise VerificationError("proof does not lead to the root", step=_INCLUSION)


def verify_consistency(
    m: int, n: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the m-record tree with ``old_root`` is a prefix of the n-record tree.

    Returns None, or raises :class:`VerificationError` with step ``"consistency proof"``.
    Like Go's ``tlog.CheckTree``: m == 0 is invalid (there is nothing to prove
    about an empty tree, and accepting it would accept any proof-less claim),
    and m == n needs an empty proof and equal roots.
    """
    _check_sizes(_CONSISTENCY, [("old root", old_root), ("new root", new_root)], proof)
    if m < 1 or n < 1 or m > n:
        raise VerificationError(f"sizes must satisfy 0 < {m} <= {n}", step=_CONSISTENCY)
    if m == n:
        if proof:
            raise VerificationError("equal sizes need an empty proof", step=_CONSISTENCY)
        if old_root != new_root:
            raise VerificationError("equal sizes but different roots", step=_CONSISTENCY)
        return
    # 1. A real extension always needs at least one hash.
    if not proof:
        raise VerificationError("empty proof for a larger tree", step=_CONSISTENCY)
    # 2. When the old tree is a complete subtree, the proof omits its hash
    #    (the verifier has it): put it back in front.
    path = [old_root, *proof] if m & (m - 1) == 0 else list(proof)
    # 3. fn walks up from the old tree's last leaf, sn from the new tree's.
    fn, sn = m - 1, n - 1
    # 4. Climb to the top of the complete subtree that ends the old tree; the
    #    first path element is that subtree's hash.
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # 5. fr rebuilds the old root, sr the new one, from the same seed.
    fr = sr = path[0]
    # 6. Fold in the remaining elements.
    for c in path[1:]:
        # 6a. Above the new root: the proof is too long.
        if sn == 0:
            raise VerificationError("proof has more elements than the path", step=_CONSISTENCY)
        # 6b. A left sibling belongs to both trees; a right sibling only to the new.
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            # 6b-ii. Skip the levels where fn is the last node and has no sibling.
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        # 6c. Up one level.
        fn >>= 1
        sn >>= 1
    # 7. Both roots must be reproduced, and the path must end at the new root.
    if sn != 0:
        raise VerificationError("proof has fewer elements than the path", step=_CONSISTENCY)
    if fr != old_root:
        raise VerificationError("proof does not lead to the old root", step=_CONSISTENCY)
    if sr != new_root:
        raise VerificationError("proof does not lead to the new root", step=_CONSISTENCY)


# --------------------------------------------------------------------------
# A throwaway in-memory store, and the plain RFC definitions for tests
# --------------------------------------------------------------------------


class MemoryHashStore:
    """Stored hashes in a list, in the layout above; for tests and throwaway trees."""

    def __init__(self) -> None:
        self.hashes: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        """The number of records appended."""
        return self._size

    def append(self, leaf_data: bytes) -> int:
        """Append a record by its leaf bytes; returns its 0-based index."""
        return self.append_leaf_hash(leaf_hash(leaf_data))

    def append_leaf_hash(self, leaf: bytes) -> int:
        """Append a record by its leaf hash; returns its 0-based index."""
        index = self._size
        self.hashes.extend(stored_hashes_for_record(index, leaf, self.read))
        self._size += 1
        return index

    def read(self, indexes: Sequence[int]) -> list[bytes]:
        """A :data:`HashReader` over this store."""
        count = len(self.hashes)
        for i in indexes:
            if not 0 <= i < count:
                raise NotFound(f"stored hash {i} does not exist (have {count})")
        return [self.hashes[i] for i in indexes]

    def root(self, n: int | None = None) -> bytes:
        """The root of the first n records (default: all of them)."""
        return tree_hash(self._size if n is None else n, self.read)


def reference_root(leaves: Sequence[bytes]) -> bytes:
    """MTH(D_n) straight from RFC 9162 2.1.1, over the leaves' *data*; O(n), for tests."""
    if not leaves:
        return EMPTY_ROOT
    if len(leaves) == 1:
        return leaf_hash(leaves[0])
    k = _split(len(leaves))
    return node_hash(reference_root(leaves[:k]), reference_root(leaves[k:]))


def reference_inclusion_proof(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PATH(m, D_n) straight from RFC 9162 2.1.3.1, over the leaves' data; for tests."""
    if not 0 <= index < len(leaves):
        raise InvalidRequest(f"index {index} outside {len(leaves)} leaves")
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*reference_inclusion_proof(index, leaves[:k]), reference_root(leaves[k:])]
    return [*reference_inclusion_proof(index - k, leaves[k:]), reference_root(leaves[:k])]


def reference_consistency_proof(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PROOF(m, D_n) straight from RFC 9162 2.1.4.1, over the leaves' data; for tests."""
    if not 0 < m <= len(leaves):
        raise InvalidRequest(f"old size {m} outside 1..{len(leaves)}")

    def subproof(m: int, d: Sequence[bytes], b: bool) -> list[bytes]:
        if m == len(d):
            return [] if b else [reference_root(d)]
        k = _split(len(d))
        if m <= k:
            return [*subproof(m, d[:k], b), reference_root(d[k:])]
        return [*subproof(m - k, d[k:], False), reference_root(d[:k])]

    return subproof(m, leaves, True)
