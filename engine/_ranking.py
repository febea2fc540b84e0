"""Ranking: exact (FTS5 BM25), reciprocal rank fusion, and the refers_to reorder.

Exact mode turns a question into an FTS5 query of its words, each quoted
(so no word is ever read as FTS syntax) and joined by OR, with common
English words dropped unless nothing else is left; BM25 then ranks the
items that share the most, and the rarest, words first. The index stems
with Porter over unicode61, case- and accent-insensitively.

Hybrid mode fuses the exact and semantic rankings by reciprocal rank
(score = sum of 61 / (60 + rank) over the rankings an item appears in, a
lexical hit weighted by the share of the question's words it contains),
which needs no calibration between BM25 and cosine scores.

Known limit: BM25 statistics span the whole index, so an exact score
depends on other namespaces' text too; scores are rounded and only order
matters.

On PostgreSQL the index is a ``tsvector`` per item of the words FTS5 would
index (see :mod:`._dialect`) with a GIN index, and the question's words
become one ``tsquery`` phrase each (a word FTS5 splits, such as
``foo_bar``, is the phrase "foo bar" in both), joined by OR. The rank is
``ts_rank`` with the same column weights, normalised by document length
(PostgreSQL keeps no corpus statistics, so a rare word weighs no more
than a common one); coverage and the order of ties are computed as on
SQLite. A read proof of a PostgreSQL read re-ranks on SQLite with
:mod:`._tsrank`, the same documents and arithmetic in Python
(``ts_rank_python``). The ranking contract both keep (tests/contract/test_ranking.py):
an item holding every word of a question outranks one holding some;
title and tag matches outrank text matches; stemmed forms and accents
match; common words alone match nothing unless the question has no other;
ties go to the newer item; scope and filters apply before ranking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import tzinfo
from typing import Any, Final

from memseal.ledger.store import Execute

from ._dates import resolve
from ._dialect import index_words, postgres_document, stem
from ._tsrank import WEIGHTS, matches, query_literal
from ._tsrank import rank as ts_rank
from .filters import DateRange

__all__ = ["RRF_K", "STOPWORDS", "exact", "fts_query", "fuse", "refers_first"]

RRF_K: Final = 60
_MAX_TERMS: Final = 16
_WORD = re.compile(r"\w+")
# The usual English stopword list (as in Lucene and NLTK, trimmed): words that
# say nothing about which memory is meant.
# A word list reads better as text than as 180 quoted literals.
STOPWORDS: Final = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t don isn aren wasn weren hasn haven hadn doesn didn won wouldn shan shouldn
    cannot ll re ve d m o y
    """.split()  # noqa: SIM905
)
# bm25 weights for the FTS columns (text, title, tags): a title or tag match says more.
_WEIGHTS: Final = "1.0, 2.0, 1.5"


def fts_query(text: str) -> str | None:
    """The FTS5 MATCH expression for a free-text question, or None if it has no words."""
    words = [w for w in _WORD.findall(text.casefold()) if w.strip("_")]
    kept = [w for w in words if w not in STOPWORDS] or words
    unique = list(dict.fromkeys(kept))[:_MAX_TERMS]
    if not unique:
        return None
    return " OR ".join(f'"{w}"' for w in unique)


def _terms(text: str) -> list[str]:
    words = [w for w in _WORD.findall(text.casefold()) if w.strip("_")]
    kept = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(kept))[:_MAX_TERMS]


def exact(
    execute: Execute, ranker: str, where: str, params: Sequence[Any], query: str, cap: int
) -> list[tuple[int, float, float]]:
    """(seq, score, coverage) of items under ``where`` matching ``query``, best first.

    ``coverage`` is the share of the query's words an item contains. The
    score is BM25 (negated, so higher is better) times coverage: Lucene's
    classic coordination factor, which keeps an item that shares one common
    word with a long question from outranking one that answers all of it.
    """
    terms = _terms(query)
    if not terms:
        return []
    if ranker == "ts_rank":
        return _postgres_exact(execute, where, params, terms, cap)
    if ranker == "ts_rank_python":
        return _python_exact(execute, where, params, terms, cap)
    match = " OR ".join(f'"{w}"' for w in terms)
    found = execute(
        f"SELECT i.seq, bm25(engine_fts, {_WEIGHTS}) AS r FROM engine_fts "
        "JOIN engine_items i ON i.seq = engine_fts.rowid "
        f"WHERE engine_fts MATCH ? AND {where} ORDER BY r, i.seq DESC LIMIT ?",
        [match, *params, cap],
    )
    if not found:
        return []
    matched: dict[int, int] = {}
    if len(terms) > 1:
        # Which ranked items each word matches, from each word's own doclist in one
        # statement. (A `rowid IN (...)` list would re-run the MATCH once per listed row.)
        ranked_seqs = {seq for seq, _ in found}
        low, high = min(ranked_seqs), max(ranked_seqs)
        one = "SELECT rowid FROM engine_fts WHERE engine_fts MATCH ? AND rowid BETWEEN ? AND ?"
        params_all: list[Any] = []
        for term in terms:
            params_all += [f'"{term}"', low, high]
        for (seq,) in execute(" UNION ALL ".join([one] * len(terms)), params_all):
            if seq in ranked_seqs:
                matched[seq] = matched.get(seq, 0) + 1
    ranked = []
    for seq, r in found:
        coverage = matched.get(seq, 1) / len(terms) if len(terms) > 1 else 1.0
        ranked.append((seq, -r * coverage, coverage))
    return _in_order(ranked)


# ts_rank's weights, in its order {D, C, B, A}: text (D), tags (B) and title (A) as
# SQLite's bm25 weights 1.0, 1.5, 2.0 (C is unused); scaled so scores read alike.
_PG_WEIGHTS: Final = "'{" + ", ".join(f"{w:g}" for w in WEIGHTS) + "}'::float4[]"
_PG_SCALE: Final = 10.0


def _phrases(terms: Sequence[str]) -> list[tuple[list[str], str]]:
    """Each query word's stems and its tsquery, for the words a document can hold."""
    out = []
    for term in terms:
        stems = index_words(term).split()
        query = query_literal(stems)
        if query is not None:
            out.append((stems, query))
    return out


def _postgres_exact(
    execute: Execute, where: str, params: Sequence[Any], terms: Sequence[str], cap: int
) -> list[tuple[int, float, float]]:
    phrases = _phrases(terms)
    if not phrases:
        return []
    words = ", ".join(f"?::tsquery AS t{k}" for k in range(len(phrases)))
    any_word = " || ".join(f"q.t{k}" for k in range(len(phrases)))
    matched = " + ".join(f"(f.doc @@ q.t{k})::int" for k in range(len(phrases)))
    # ::float8 widens the float4 rank exactly (its text form would round it), so a proof
    # re-deriving the read in Python (_tsrank) gets the very same number.
    found = execute(
        f"WITH q AS (SELECT {words}) "
        f"SELECT i.seq, ts_rank({_PG_WEIGHTS}, f.doc, {any_word}, 1)::float8 AS r, {matched} "
        "FROM engine_fts f JOIN engine_items i ON i.seq = f.seq CROSS JOIN q "
        f"WHERE f.doc @@ ({any_word}) AND {where} ORDER BY r DESC, i.seq DESC LIMIT ?",
        [*(query for _, query in phrases), *params, cap],
    )
    return _ts_ranked(found, len(terms))


def _python_exact(
    execute: Execute, where: str, params: Sequence[Any], terms: Sequence[str], cap: int
) -> list[tuple[int, float, float]]:
    """What :func:`_postgres_exact` returns, computed over a SQLite store's items.

    It must find exactly the matches the database did, so it cannot ask FTS5: FTS5's
    Porter is not Snowball's (it stems "0s", "abbli" or "axizeibli" apart from
    :func:`._dialect.index_words`, and it leaves tokens under 3 or over 64 characters
    alone), so an FTS5 query can miss an item whose document holds the word. Instead a
    necessary condition on the raw text drops most items before the costly document is
    built (:func:`_could_match`); the ranking is that of :func:`_python_exact_full`.
    """
    phrases = [stems for stems, _ in _phrases(terms)]
    if not phrases:
        return []
    # One stem per phrase is enough to rule an item out; the longest has the most
    # selective prefix.
    keys = [max(stems, key=len) for stems in phrases]
    prefixes = list(dict.fromkeys(_stable_prefix(key) for key in keys))
    whole = "(i.text || ' ' || coalesce(i.title, '') || ' ' || i.tags)"
    # length() counts characters up to a NUL, the blob's length counts bytes: they differ
    # for any non-ASCII character (or NUL), where SQLite's lower() is not Python's fold.
    maybe = " OR ".join(
        [f"length(CAST({whole} AS BLOB)) <> length({whole})"]
        + [f"instr(lower({whole}), ?) > 0" for _ in prefixes]
    )
    rows = execute(
        f"SELECT i.seq, i.text, i.title, i.tags FROM engine_items i WHERE ({where}) AND ({maybe})",
        [*params, *prefixes],
    )
    held, near = frozenset(keys), _near(keys)
    found = _scored((row for row in rows if _could_match(row[1:], held, near)), phrases)
    return _ts_ranked(found[:cap], len(terms))


def _python_exact_full(
    execute: Execute, where: str, params: Sequence[Any], terms: Sequence[str], cap: int
) -> list[tuple[int, float, float]]:
    """:func:`_python_exact` by scoring every item under ``where`` (what it must equal)."""
    phrases = [stems for stems, _ in _phrases(terms)]
    if not phrases:
        return []
    rows = execute(
        f"SELECT i.seq, i.text, i.title, i.tags FROM engine_items i WHERE {where}", params
    )
    return _ts_ranked(_scored(rows, phrases)[:cap], len(terms))


def _scored(
    rows: Iterable[tuple[Any, ...]], phrases: Sequence[Sequence[str]]
) -> list[tuple[int, float, int]]:
    found: list[tuple[int, float, int]] = []
    for seq, text, title, tags in rows:
        doc = postgres_document(text, title, tags)
        hits = sum(matches(doc, stems) for stems in phrases)
        if hits:
            found.append((seq, ts_rank(doc, phrases), hits))
    found.sort(key=lambda p: (-p[1], -p[0]))
    return found


# Snowball's Porter only cuts a word's end and writes back at most two letters of its own
# ("biliti" -> "ble" is the one rule that could), so a word stemming to s begins with all
# of s but its last two. (Random searches of a million words never saw more than one.)
_STEM_ADDS: Final = 2


def _stable_prefix(stem: str) -> str:
    return stem[: max(len(stem) - _STEM_ADDS, 0)]


def _near(keys: Sequence[str]) -> re.Pattern[str]:
    """The whole lowercase ASCII words that start with a key's stable prefix."""
    starts = "|".join(re.escape(_stable_prefix(key)) for key in keys)
    return re.compile(rf"(?<![a-z0-9])(?:{starts})[a-z0-9]*")


def _could_match(columns: Sequence[Any], keys: frozenset[str], near: re.Pattern[str]) -> bool:
    """False only if the item's document holds none of ``keys`` (so matches no phrase).

    On ASCII text index_words is lowercasing, splitting on what is not [a-z0-9] and
    stemming, so only the words ``near`` finds could stem to a key; only they are
    stemmed. Other text is left to the full document.
    """
    text, title, tags = columns
    whole = f"{text} {title or ''} {tags}"
    if not whole.isascii():
        return True
    return any(stem(word) in keys for word in near.findall(whole.lower()))


def _ts_ranked(
    found: Sequence[tuple[int, float, int]], terms: int
) -> list[tuple[int, float, float]]:
    ranked = []
    for seq, r, hits in found:
        coverage = hits / terms if terms > 1 else 1.0
        ranked.append((seq, r * _PG_SCALE * coverage, coverage))
    return _in_order(ranked)


def _in_order(ranked: list[tuple[int, float, float]]) -> list[tuple[int, float, float]]:
    """Best first by the unrounded score (ties to the newer item), then rounded for show.

    Rounding first would tie what BM25 told apart: FTS5 weighs a word found in half the
    items or more at 1e-6, so in a small memory every score rounds to 0.0.
    """
    ranked.sort(key=lambda p: (-p[1], -p[0]))
    return [(seq, round(score, 4), coverage) for seq, score, coverage in ranked]


def fuse(
    lexical: Sequence[tuple[int, float, float]], semantic: Sequence[tuple[int, float]], cap: int
) -> list[tuple[int, float]]:
    """Reciprocal rank fusion; a lexical hit counts in proportion to its coverage.

    Each ranking adds ``(k + 1) / (k + rank)``: the classic ``1 / (k + rank)``
    scaled so that a first place is worth 1.0, which keeps the score readable
    when rounded to four places. Order is by the unrounded sum; ties go to
    the newer item.
    """
    scores: dict[int, float] = {}
    for rank, (seq, _, coverage) in enumerate(lexical, start=1):
        scores[seq] = scores.get(seq, 0.0) + coverage * (RRF_K + 1) / (RRF_K + rank)
    for rank, (seq, _) in enumerate(semantic, start=1):
        scores[seq] = scores.get(seq, 0.0) + (RRF_K + 1) / (RRF_K + rank)
    fused = sorted(scores.items(), key=lambda p: (-p[1], -p[0]))[:cap]
    return [(seq, round(score, 4)) for seq, score in fused]


def refers_first(
    execute: Execute, ranked: Sequence[tuple[int, float]], days: DateRange, zone: tzinfo
) -> list[tuple[int, float]]:
    """``ranked`` with the items about ``days`` first, each part in its own order; none dropped."""
    if not ranked:
        return []
    refs: dict[int, list[str]] = {}
    observed: dict[int, str] = {}
    seqs = [seq for seq, _ in ranked]
    for start in range(0, len(seqs), 500):
        part = seqs[start : start + 500]
        marks = ",".join("?" * len(part))
        for seq, at in execute(
            f"SELECT seq, observed_at FROM engine_items WHERE seq IN ({marks})", part
        ):
            observed[seq] = at
        for seq, ref in execute(f"SELECT seq, ref FROM engine_dates WHERE seq IN ({marks})", part):
            refs.setdefault(seq, []).append(ref)
    first: list[tuple[int, float]] = []
    rest: list[tuple[int, float]] = []
    for seq, score in ranked:
        at = observed.get(seq)
        about = resolve(refs.get(seq, ()), at, zone) if at is not None else set()
        hit = any(days.first <= day <= days.last for day in about)
        (first if hit else rest).append((seq, score))
    return first + rest
