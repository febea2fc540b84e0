"""The plain RFC 6962 shapes of proofs, shared by the Merkle unit and property tests.

A proof's shape says which side each element sits on; a proof verifies for another tree
size exactly when the shape is the same there (RFC 9162 roots do not record the size).
"""

from __future__ import annotations


def split(size: int) -> int:
    """The largest power of two strictly smaller than ``size`` (>= 2)."""
    k = 1
    while 2 * k < size:
        k *= 2
    return k


def inclusion_shape(index: int, n: int) -> tuple[str, ...]:
    """Which side each audit-path element sits on, leaf to root (RFC PATH)."""
    if n == 1:
        return ()
    k = split(n)
    if index < k:
        return (*inclusion_shape(index, k), "right")
    return (*inclusion_shape(index - k, n - k), "left")


def consistency_shape(m: int, n: int, whole: bool = True) -> tuple[str, ...]:
    """The form of PROOF(m, D_n): where the seed comes from, then each element's side."""
    if m == n:
        return ("old root" if whole else "proof",)
    k = split(n)
    if m <= k:
        return (*consistency_shape(m, k, whole), "right")
    return (*consistency_shape(m - k, n - k, False), "left")
