"""engine/_tsrank.py against a real PostgreSQL: the same documents, matches and ranks.

A read proof re-derives a read recorded on PostgreSQL with ``_tsrank``'s Python
``ts_rank``. Each case here builds a document from random words (a small
vocabulary, so words repeat and phrases occur), asks the server to rank it,
and holds the Python result to the server's float4 bit for bit; the match
(``@@``) too, and, for documents inside PostgreSQL's limits, that memseal's
literal is the document ``to_tsvector('simple')`` made before, so a store
written by an earlier memseal ranks the same.
"""

from __future__ import annotations

import random

import pytest
from stores import POSTGRES

from memseal.engine._ranking import _PG_WEIGHTS
from memseal.engine._tsrank import document, literal, matches, query_literal, rank

pytestmark = pytest.mark.skipif(POSTGRES is None, reason="needs MEMSEAL_TEST_POSTGRES")

_VOCAB = ["a", "b", "c", "dd", "e1", "f", "g", "ab", "abc", "x9", "zz", "\u00e9t\u00e9", "run"]
_OLD_DOC = (
    "setweight(to_tsvector('simple', %s), 'D') || setweight(to_tsvector('simple', %s), 'A') "
    "|| setweight(to_tsvector('simple', %s), 'B')"
)


def _cases(seed: int, count: int, lengths: list[int]) -> list[tuple[list[str], list[list[str]]]]:
    rnd = random.Random(seed)
    out: list[tuple[list[str], list[list[str]]]] = []
    while len(out) < count:
        columns = [" ".join(rnd.choice(_VOCAB) for _ in range(rnd.choice(lengths))) for _ in "abc"]
        terms = [
            [rnd.choice(_VOCAB) for _ in range(rnd.choice([1, 1, 2, 3]))]
            for _ in range(rnd.choice([1, 1, 2, 3, 5]))
        ]
        if any(columns):
            out.append((columns, terms))
    return out


def _check(cases: list[tuple[list[str], list[list[str]]]], *, old_same: bool) -> int:
    import psycopg

    assert POSTGRES is not None
    differ = 0
    with psycopg.connect(POSTGRES) as conn:
        for columns, terms in cases:
            doc = document(*columns)
            queries = [query_literal(t) for t in terms]
            q = " || ".join("%s::tsquery" for _ in queries)
            row = conn.execute(
                f"SELECT ts_rank({_PG_WEIGHTS}, %s::tsvector, {q}, 1)::float8, "
                f"%s::tsvector @@ ({q}), %s::tsvector = ({_OLD_DOC})",
                [literal(doc), *queries, literal(doc), *queries, literal(doc), *columns],
            ).fetchone()
            assert row is not None
            rank_sql, match_sql, same_sql = row
            assert rank(doc, terms) == rank_sql, (columns, terms)
            assert any(matches(doc, t) for t in terms) == match_sql, (columns, terms)
            differ += not same_sql
            if old_same:
                assert same_sql, columns
    return differ


def test_ranks_matches_and_documents_equal_the_servers() -> None:
    _check(_cases(7, 1_500, [0, 1, 2, 5, 20, 60]), old_same=True)


def test_past_postgresqls_limits_the_rank_still_equals_the_servers() -> None:
    # 300 repeats pass a lexeme's 256 positions, 17,000 words the 16,383rd position:
    # there the literal is memseal's own document (to_tsvector's would differ), and
    # ts_rank of it is still what _tsrank computes.
    differ = _check(_cases(11, 40, [0, 1, 300, 17_000]), old_same=False)
    assert differ > 0  # the limits were reached: the cases test what they say


def test_a_word_too_long_to_index_takes_no_position_as_in_to_tsvector() -> None:
    # A word of 2,047 bytes or more is left out; to_tsvector gives it no position, so the
    # words after it sit where an older store's document has them, phrases across it too.
    long = "x" * 2_047
    cases = [
        ([f"a {long} b", f"c {long}", "d"], [["a", "b"], ["b", "c"], ["c", "d"]]),
        ([f"{long} {long} a", "", f"b {long}"], [["a"], ["a", "b"]]),
        ([f"a {'y' * 2_046} b", "", ""], [["a", "b"], ["y" * 2_046]]),
    ]
    _check(cases, old_same=True)
    assert matches(document(f"a {long} b", "", ""), ["a", "b"])
