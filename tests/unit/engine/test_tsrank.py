"""engine/_tsrank.py on its own: documents, literals, phrases (the server check is
tests/integration/test_tsrank_postgres.py)."""

from __future__ import annotations

from memseal.engine._tsrank import document, literal, matches, query_literal, rank


def test_a_document_places_columns_after_one_another_with_their_weights() -> None:
    doc = document("run fast run", "fast", "tag")
    assert doc == {"run": ((1, 0), (3, 0)), "fast": ((2, 0), (4, 3)), "tag": ((5, 2),)}
    assert literal(doc) == "'fast':2,4A 'run':1,3 'tag':5B"


def test_limits_cap_positions_and_leave_out_overlong_lexemes() -> None:
    doc = document(" ".join(["w"] * 300 + ["x" * 3000, "y"]), "", "")
    assert len(doc["w"]) == 255 and "x" * 3000 not in doc
    assert doc["y"] == ((301, 0),)  # the left-out lexeme takes no position
    assert document(" ".join(["z"] * 17_000) + " q", "", "")["q"] == ((16_383, 0),)


def test_a_phrase_matches_adjacent_positions_only_and_quotes_are_escaped() -> None:
    doc = document("foo bar baz", "", "")
    assert matches(doc, ["foo", "bar"]) and matches(doc, ["bar", "baz"])
    assert not matches(doc, ["foo", "baz"]) and not matches(doc, ["baz", "foo"])
    assert not matches(doc, []) and not matches(doc, ["nope"])
    assert query_literal(["it's", "a\\b"]) == "'it''s' <-> 'a\\\\b'"
    assert query_literal(["x" * 3000]) is None and query_literal([]) is None


def test_a_title_word_outranks_a_text_word_and_an_empty_document_ranks_zero() -> None:
    in_title = document("other words here", "ledger", "")
    in_text = document("ledger words here", "other", "")
    assert rank(in_title, [["ledger"]]) > rank(in_text, [["ledger"]]) > 0
    assert rank({}, [["ledger"]]) == 0.0
