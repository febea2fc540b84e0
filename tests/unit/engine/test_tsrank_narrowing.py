"""ts_rank_python's narrowing drops no item the full scan ranks (engine/_ranking.py).

A read proof of a PostgreSQL read re-ranks on SQLite, and must get the very list the
database did. The narrowed ranker skips items by a test on their raw text; over a random
corpus of words that split, carry accents, stem unlike FTS5 ("0s", "abbli", "axizeibli")
or stem to forms Porter would stem again, every question must rank exactly as scoring
every item does: same seqs, scores and order, capped alike. (Asking FTS5 instead, with
the question's own words, misses items here: its Porter is not Snowball's.)
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

from memseal.engine._ranking import _python_exact_full, _terms, exact
from memseal.engine._schema import ddl_for

_WORDS = [
    "ledger", "ledgers", "store", "stored", "storing", "generous", "generalization",
    "general", "apology", "apologies", "0s", "0", "1990s", "1990", "abbli", "abble",
    "axizeibli", "aliz", "saying", "say", "sayings", "foo_bar", "foo", "bar", "don't",
    "don", "café", "cafe", "naïve", "naive", "Straße", "strasse", "ﬁsh", "fish", "the",
    "and", "of", "happy", "happiness", "happi", "relational", "relate", "conditional",
    "probability", "probabl", "agreed", "agree", "a", "is", "memory", "memories",
]  # fmt: skip


def _db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.executescript(ddl_for("sqlite"))
    return db


def _fill(db: sqlite3.Connection, rnd: random.Random, count: int) -> None:
    for seq in range(1, count + 1):
        text = " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(0, 12)))
        title = " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(0, 3))) or None
        tags = " ".join(rnd.sample(_WORDS, rnd.randint(0, 2)))
        namespace = rnd.choice(["a", "b"])
        db.execute(
            "INSERT INTO engine_items (seq, id, kind, namespace, trust, trust_rank, "
            "observed_at, stored_at, text, title, tags, meta, detail, content) "
            "VALUES (?, ?, 'learning', ?, 'unverified', 0, '', '', ?, ?, ?, '{}', '{}', ?)",
            (seq, f"i{seq}", namespace, text, title, tags, f"c{seq}"),
        )
    db.execute("INSERT INTO engine_fts (engine_fts) VALUES ('rebuild')")
    db.commit()


def test_the_narrowed_ranking_is_the_full_scan(tmp_path: Path) -> None:
    rnd = random.Random(11)
    db = _db(tmp_path / "e.db")
    _fill(db, rnd, 150)

    def execute(sql: str, params: Any) -> list[tuple[Any, ...]]:
        return db.execute(sql, list(params)).fetchall()

    # "foo_bar" as "foo bar" and a title word after a text word: phrases across columns.
    questions = ["foo_bar", "the and", "of", "0", "0s", "ledger store", "abble", "aliz"]
    questions += [" ".join(rnd.sample(_WORDS, rnd.randint(1, 4))) for _ in range(40)]
    ranked = 0
    for question in questions:
        for where, params in (("1 = 1", []), ("i.namespace = ?", ["a"])):
            for cap in (3, 1_000):
                full = _python_exact_full(execute, where, params, _terms(question), cap)
                narrowed = exact(execute, "ts_rank_python", where, params, question, cap)
                assert narrowed == full, (question, where, cap)
                ranked += len(full)
    assert ranked > 1_000  # the questions found plenty, ties and capped lists among them


def test_an_item_fts5_would_miss_is_ranked(tmp_path: Path) -> None:
    # FTS5 leaves "0s" unstemmed (under 3 characters); the PostgreSQL document holds "0".
    db = _db(tmp_path / "e.db")
    rnd = random.Random(1)
    _fill(db, rnd, 0)
    db.execute(
        "INSERT INTO engine_items (seq, id, kind, namespace, trust, trust_rank, observed_at, "
        "stored_at, text, title, tags, meta, detail, content) VALUES "
        "(1, 'i1', 'learning', 'a', 'unverified', 0, '', '', 'the 0s', NULL, '', "
        "'{}', '{}', 'c1')"
    )
    db.execute("INSERT INTO engine_fts (engine_fts) VALUES ('rebuild')")

    def execute(sql: str, params: Any) -> list[tuple[Any, ...]]:
        return db.execute(sql, list(params)).fetchall()

    for question in ("0",):
        assert [
            seq for seq, _, _ in exact(execute, "ts_rank_python", "1 = 1", [], question, 9)
        ] == [1]
        fts = execute("SELECT rowid FROM engine_fts WHERE engine_fts MATCH ?", [f'"{question}"'])
        assert fts == []
