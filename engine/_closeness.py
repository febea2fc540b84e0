"""Which of a read's candidates are similar: the currency rule's test, for less.

Two candidates are similar when the cosine of their vectors (a semantic or hybrid
read: every candidate has one, of one size) or, else, the overlap of their stemmed
words reaches the rule's threshold (:mod:`.currency`). A read proof re-derives the
result, so it must be the reference's to the last pair.

**Cosines**, every pair at once. The rule takes the cosine numpy's einsum gives
(float32, one fixed summation order), rounded to four places. A float32 dot product
of ``d`` terms, summed in any order, lies within ``γ·Σ|x_k·y_k| ≤ γ·|x|·|y|`` of the
exact one (``γ = d·u/(1 - d·u)``, ``u = 2^-24``: Higham, *Accuracy and Stability of
Numerical Algorithms*, 3.1), so BLAS's product (a few times faster, in its own order)
lies within twice that of einsum's. Rounding and comparing never decrease as the
value grows, so where both ends of that interval decide alike, einsum's value decides
the same; only when a pair that may link lies nearer the threshold than that is
einsum's matrix computed, exactly as the reference computes it.

**Words**, a pair when asked: most pairs never are (the order and the marks turn on
a few, see :mod:`._linking`). ``common / sqrt(size * size)`` is the float Python's
``overlap`` computes before rounding it to four places, which moves it by at most
0.00005: past 0.0001 from the threshold either side the value decides, and nearer,
``overlap`` itself.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from ._rule_reading import overlap

if TYPE_CHECKING:
    from ._rule_reading import Reading
    from .currency import Candidate, Rule

__all__ = ["Similar", "similar"]

_np: Any
try:  # numpy is optional (see _resident); without it a semantic read takes the reference
    import numpy

    _np = numpy
except ImportError:  # pragma: no cover - exercised only where numpy is absent
    _np = None

#: The numpy type of a little-endian word of so many bytes.
_WORDS: Final = {1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}
#: float32's unit roundoff.
_U = 2.0**-24
#: The bound taken for squared norms up to it: a unit vector's, and a little more.
_UNIT = 1.0 + 2.0**-16


class Similar:
    """The pairs that may link, and which of them are similar as far as known: per
    candidate (by head position), the bits of the newer ones it may link to
    (``newer``), of the older ones that may link to it (``older``), and of the newer
    ones known similar (``near``) and known not (``far``). :meth:`settle` decides one
    pair more; a read asks it only about the pairs its order and marks turn on (on a
    lexical read most are never weighed)."""

    __slots__ = ("_test", "far", "near", "newer", "older")

    def __init__(
        self,
        newer: list[int],
        older: list[int],
        near: list[int],
        test: Callable[[int, int], bool] | None = None,
    ) -> None:
        self.newer, self.older, self.near, self._test = newer, older, near, test
        self.far = [0] * len(newer)

    def settle(self, a: int, b: int) -> bool:
        """Whether the head's ``a``-th and ``b``-th (newer) are similar, ``b`` among
        ``a``'s :attr:`newer` and neither :attr:`near` nor :attr:`far` it yet (then
        recorded in ``a``'s rows)."""
        if self._test is not None and self._test(a, b):
            self.near[a] |= 1 << b
            return True
        self.far[a] |= 1 << b
        return False


def similar(
    cs: Sequence[Candidate],
    reads: Sequence[Reading],
    rule: Rule,
    newer: list[int],
    older: list[int],
) -> Similar | None:
    """The pairs of ``newer`` (per candidate, ``cs`` being the head by rank, the bits of
    the newer ones it may link to; ``older``: the same pairs seen from the newer one),
    and what is known of them at first: on a semantic read every pair, decided at once
    (the pairs left are the similar ones); on a lexical read none, each weighed when
    asked. None: numpy is absent and the candidates have vectors (the reference then
    decides in Python)."""
    vectors = [c.vector for c in cs]
    if all(v is not None for v in vectors) and len({len(v or b"") for v in vectors}) == 1:
        if _np is None:  # pragma: no cover - exercised only where numpy is absent
            return None
        links = [n | o for n, o in zip(newer, older, strict=True)]
        close = _by_cosine(cs, rule.cosine, links)
        near = [row & c for row, c in zip(newer, close, strict=True)]
        return Similar(near, [row & c for row, c in zip(older, close, strict=True)], near)
    return Similar(newer, older, [0] * len(cs), _by_words(cs, reads, rule, newer))


def _rows(close: Any) -> list[int]:
    """Each row of a boolean matrix as the bits of one integer (bit ``b``: column ``b``)."""
    packed = _np.ascontiguousarray(_np.packbits(close, axis=1, bitorder="little"))
    width = packed.shape[1]
    if width in _WORDS:  # each row one little-endian word: read them all at once
        return packed.view(_WORDS[width]).ravel().tolist()  # type: ignore[no-any-return]
    raw = packed.tobytes()
    return [int.from_bytes(raw[a * width : (a + 1) * width], "little") for a in range(len(close))]


@functools.cache
def _cut(threshold: float) -> float:
    """The least float64 whose rounding to four places (numpy's, as the reference
    rounds) reaches ``threshold``: rounding never decreases as a value grows, so a
    cosine decides as the reference decides it exactly when it is at least this."""

    def reaches(bits: int) -> bool:
        value = _np.array([bits], dtype=_np.int64).view(_np.float64)
        return bool(_np.round(value, 4)[0] >= threshold)

    def bits_of(value: float) -> int:
        return int(_np.array([value], dtype=_np.float64).view(_np.int64)[0])

    # Positive floats order as their bit patterns do: bisect those, from below the
    # threshold's last rounding step to the threshold itself.
    low, high = bits_of(max(threshold - 0.001, 0.0)), bits_of(threshold + 0.001)
    if threshold <= 0.001 or reaches(low) or not reaches(high):
        return math.nan  # a threshold this near zero: einsum's matrix decides
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return float(_np.array([high], dtype=_np.int64).view(_np.float64)[0])


@functools.lru_cache(maxsize=64)
def _ends(threshold: float, dims: int, top: float) -> tuple[Any, Any]:
    """The float32 ends (rounded outwards) of the interval about :func:`_cut` within
    which einsum's cosine may lie on either side of it, for ``dims`` terms and squared
    norms at most ``top`` (``(None, None)``: no cut, einsum decides)."""
    cut = _cut(threshold)
    if cut != cut:
        return None, None
    gamma = dims * _U / (1 - dims * _U)
    # The float64 steps that compute the ends are covered by the margin past them.
    spread = 2.0 * gamma * top / (1 - gamma) * 1.01 + 1e-12
    return _float32(cut - spread, up=False), _float32(cut + spread, up=True)


def _float32(value: float, up: bool) -> Any:
    """The float32 nearest ``value`` on its side: at least it (``up``) or at most it."""
    near = _np.float32(value)
    if (float(near) < value) if up else (float(near) > value):
        near = _np.nextafter(near, _np.float32(_np.inf if up else -_np.inf))
    return near


def _by_cosine(cs: Sequence[Candidate], threshold: float, links: list[int]) -> list[int]:
    """Whether each pair's rounded cosine reaches ``threshold``, as the reference
    decides it (see the module docstring), by rank: right for the pairs in ``links``."""
    n = len(cs)
    matrix = _np.frombuffer(b"".join([c.vector or b"" for c in cs]), dtype="<f4").reshape(n, -1)
    # BLAS: the pairs x . y at once, in its own order. An out-of-spec vector (inf, huge)
    # overflows here silently, as einsum did: the check below sends it to the reference.
    with _np.errstate(all="ignore"):
        product = _np.inner(matrix, matrix)
    # Every |x|^2 is at most its diagonal entry (within gamma of it) over 1 - gamma.
    diagonal = product.diagonal().tolist()
    # Every |x|^2 finite (a NaN makes the sum one) and small enough that no sum of
    # products can overflow, whatever its order.
    if sum(diagonal) <= 1e30:
        # Unit vectors (the embedders' own) share one bound, and so one interval.
        low, high = _ends(threshold, matrix.shape[1], max(max(diagonal), _UNIT))
        if low is not None:
            close = product >= high
            doubt = product >= low
            doubt ^= close
            rows = _rows(close)
            if not _np.logical_or.reduce(doubt, axis=None):
                return rows
            if not any(row & pairs for row, pairs in zip(_rows(doubt), links, strict=True)):
                return rows
    # A pair too near the threshold to tell: einsum's matrix, as the reference made it
    # (in (time, seq) order; einsum, not BLAS: one fixed order whatever the threads).
    by_time = sorted(range(n), key=lambda a: (cs[a].observed_at, cs[a].seq))
    timed = _np.frombuffer(b"".join([cs[a].vector or b"" for a in by_time]), dtype="<f4")
    timed = timed.reshape(n, -1)
    close = _np.round(_np.einsum("ik,jk->ij", timed, timed).astype(_np.float64), 4) >= threshold
    at = [0] * n
    for t, a in enumerate(by_time):
        at[a] = t
    return _rows(close[at][:, at])


def _by_words(
    cs: Sequence[Candidate], reads: Sequence[Reading], rule: Rule, newer: list[int]
) -> Callable[[int, int], bool]:
    """The test of two candidates' stemmed words (``overlap``, see the module docstring)."""
    targets = 0
    for row in newer:
        targets |= row
    words: list[frozenset[str]] = []
    for a, (c, read) in enumerate(zip(cs, reads, strict=True)):
        involved = newer[a] or targets >> a & 1
        words.append(read.words(c.text, rule.chars) if involved else read.stems or frozenset())
    shared, lexical = rule.shared, rule.lexical
    # Rounding to four places moves a value by at most 0.00005: past 0.0001 from the
    # threshold either side the value decides, and nearer, ``overlap`` itself.
    high, low = lexical + 0.0001, lexical - 0.0001

    def test(a: int, b: int) -> bool:
        mine, theirs = words[a], words[b]
        common = len(mine & theirs)
        if common < shared:  # (shared is 1 or more here: none shared is below it)
            return False
        value = common / math.sqrt(len(mine) * len(theirs))
        return value >= high or (value >= low and overlap(mine, theirs, shared) >= lexical)

    def exact(a: int, b: int) -> bool:
        return overlap(words[a], words[b], shared) >= lexical

    # Under a rule where a pair sharing nothing may count, overlap decides every pair.
    return exact if shared < 1 or lexical <= 0 else test
