"""PostgreSQL's full-text documents and ``ts_rank``, computed in Python.

Why: a read recorded on PostgreSQL is ranked by ``ts_rank``, and a read
proof re-derives it offline on SQLite. FTS5's BM25 orders close texts
differently, so a proof of such a read could not verify. With the same
documents and the same arithmetic here, it re-derives exactly.

Two halves make that possible:

* memseal writes every PostgreSQL document itself, as a ``tsvector``
  literal of the words FTS5 would index (:func:`~._dialect.index_words`),
  with positions and weights it computes: no text parser of the server
  decides where a word starts, so the verifier sees the same lexemes. For
  a text of ordinary words it is the document ``to_tsvector('simple')``
  made before (tests/integration/test_tsrank_postgres.py checks both);
* :func:`rank` is ``ts_rank(weights, doc, query, 1)`` over such a
  document, step for step as PostgreSQL's ``calc_rank_or`` and
  ``calc_rank_and`` compute it, rounding to single precision
  (``float4``) exactly where the C code does, so ties and near-ties come
  out the same. :func:`matches` is the ``@@`` of a phrase query.

The document is built as ``setweight(to_tsvector(text), 'D') ||
setweight(to_tsvector(title), 'A') || setweight(to_tsvector(tags), 'B')``
would be: positions count from 1 in each column, a column's positions are
shifted by the largest one before it, a position is capped at 16,383 and a
lexeme keeps at most 255 of them (PostgreSQL's limits are 16,383 and 256),
and a lexeme of 2,047 bytes or more is left out without taking a position
(PostgreSQL refuses one, and ``to_tsvector`` skips it so).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Final

__all__ = ["WEIGHTS", "Document", "document", "literal", "matches", "query_literal", "rank"]

#: A document: each lexeme's positions, ascending, each with its weight (0 = D ... 3 = A).
Document = dict[str, tuple[tuple[int, int], ...]]

_MAX_POS: Final = 16_383
_MAX_POSITIONS: Final = 255
_MAX_LEXEME_BYTES: Final = 2_046  # PostgreSQL refuses 2,047 bytes and more
_D, _B, _A = 0, 2, 3
_LETTER: Final = "DCBA"
#: ts_rank's weights in its order {D, C, B, A}, as PostgreSQL reads '{0.4, 0, 0.6, 0.8}'.
WEIGHTS: Final = (0.4, 0.0, 0.6, 0.8)
_PI2_6: Final = 1.64493406685

_f32_struct = struct.Struct("f")


def _f32(value: float) -> float:
    """``value`` rounded to single precision, as a C ``float`` holds it."""
    result: float = _f32_struct.unpack(_f32_struct.pack(value))[0]
    return result


_W: Final = tuple(_f32(w) for w in WEIGHTS)


def _column(words: str, weight: int) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    index = 0
    for word in words.split():
        if len(word.encode()) > _MAX_LEXEME_BYTES:
            continue  # to_tsvector skips it without a position: older documents agree
        index += 1
        positions = found.setdefault(word, [])
        pos = min(index, _MAX_POS)
        if len(positions) < _MAX_POSITIONS and (not positions or positions[-1] != pos):
            positions.append(pos)
    return found


def document(text_words: str, title_words: str, tags_words: str) -> Document:
    """The weighted document of an item's index words (the module docstring says how)."""
    merged: dict[str, list[tuple[int, int]]] = {}
    shift = 0
    for words, weight in ((text_words, _D), (title_words, _A), (tags_words, _B)):
        column = _column(words, weight)
        top = 0
        for word, positions in column.items():
            have = merged.setdefault(word, [])
            for pos in positions:
                at = min(pos + shift, _MAX_POS)
                if len(have) >= _MAX_POSITIONS or (have and have[-1][0] >= at):
                    break
                have.append((at, weight))
            top = max(top, positions[-1])
        # As tsvector || does: the next column starts after this one's largest position.
        shift = min(shift + top, _MAX_POS) if top else shift
    return {word: tuple(p) for word, p in merged.items()}


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def literal(doc: Document) -> str:
    """``doc`` as a ``tsvector`` literal that PostgreSQL reads back unchanged."""
    return " ".join(
        _quoted(word) + ":" + ",".join(f"{pos}{_LETTER[w] if w else ''}" for pos, w in positions)
        for word, positions in sorted(doc.items(), key=lambda p: p[0].encode())
    )


def query_literal(stems: Sequence[str]) -> str | None:
    """The ``tsquery`` of one query word's stems (a phrase when several), or None if none
    can be in a document."""
    kept = [s for s in stems if s]
    if not kept or any(len(s.encode()) > _MAX_LEXEME_BYTES for s in kept):
        return None
    return " <-> ".join(_quoted(s) for s in kept)


def matches(doc: Document, stems: Sequence[str]) -> bool:
    """Whether ``doc @@`` the phrase of ``stems`` (each at the position after the last)."""
    if not stems:
        return False
    first = doc.get(stems[0])
    if first is None:
        return False
    rest = []
    for stem in stems[1:]:
        found = doc.get(stem)
        if found is None:
            return False
        rest.append({pos for pos, _ in found})
    return any(all(pos + k in later for k, later in enumerate(rest, start=1)) for pos, _ in first)


def _word_distance(dist: int) -> float:
    if dist > 100:
        return _f32(1e-30)
    return _f32(1.0 / (1.005 + 0.05 * math.exp(_f32(float(dist)) / 1.5 - 2)))


def _rank_or(doc: Document, operands: list[str]) -> float:
    res = 0.0
    for item in operands:
        positions = doc.get(item)
        if positions is None:
            continue
        resj, wjm, jm = 0.0, -1.0, 0
        for j, (_, weight) in enumerate(positions):
            wp = _W[weight]
            resj = _f32(resj + _f32(wp / ((j + 1) * (j + 1))))
            if wp > wjm:
                wjm, jm = wp, j
        part = _f32(_f32(wjm + resj) - _f32(wjm / ((jm + 1) * (jm + 1))))
        res = _f32(res + part / _PI2_6)
    if operands:
        res = _f32(res / len(operands))
    return res


def _rank_and(doc: Document, operands: list[str]) -> float:
    res = -1.0
    seen: list[tuple[tuple[int, int], ...] | None] = []
    for item in operands:
        positions = doc.get(item)
        seen.append(positions)
        if positions is None:
            continue
        for earlier in seen[:-1]:
            if earlier is None:
                continue
            for pos_l, w_l in positions:
                for pos_p, w_p in earlier:
                    dist = abs(pos_l - pos_p)
                    if not dist:
                        continue
                    product = _f32(_f32(_W[w_l] * _W[w_p]) * _word_distance(dist))
                    curw = _f32(math.sqrt(product))
                    res = curw if res < 0 else _f32(1.0 - (1.0 - res) * (1.0 - curw))
    return res


def rank(doc: Document, terms: Sequence[Sequence[str]]) -> float:
    """``ts_rank('{0.4, 0, 0.6, 0.8}', doc, t1 || t2 || ..., 1)`` for the phrases ``terms``,
    as the ``float4`` PostgreSQL returns (widened to a float exactly)."""
    if not doc or not terms:
        return 0.0
    # The query's operands, sorted bytewise and unique (PostgreSQL's SortAndUniqItems).
    operands = sorted({s for stems in terms for s in stems}, key=str.encode)
    phrase = len(terms) == 1 and len(terms[0]) > 1
    res = _rank_and(doc, operands) if phrase and len(operands) > 1 else _rank_or(doc, operands)
    if res < 0:
        res = _f32(1e-20)
    length = sum(len(p) for p in doc.values())
    return _f32(res / (math.log(length + 1) / math.log(2.0)))
